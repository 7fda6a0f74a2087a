package publisher_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

type seqs struct{ got []uint64 }

func (s *seqs) OnTicks(ts []ring.Tick) {
	for _, t := range ts {
		s.got = append(s.got, t.Seq)
	}
}
func (s *seqs) OnEvent(ring.Event) {}

type rig struct {
	node *bus.Node
	devs *link.Devices
	sub  *subscriber.Subscriber
	h    *seqs
}

func newRig(t *testing.T, ctx context.Context, topic string) *rig {
	t.Helper()
	node, err := bus.Open(ctx, bus.Config{NodeID: "n-" + topic})
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	t.Cleanup(func() { devs.Close() })
	h := &seqs{}
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: topic, StatsInterval: -1, DrainQuiet: 20 * time.Millisecond}, h)
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	return &rig{node: node, devs: devs, sub: sub, h: h}
}

func (r *rig) drain() {
	for r.sub.Poll() > 0 {
	}
}

func TestPublisher_PublishAt_ABLinesArbitrateInOneCAS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "ab")
	lineA, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "ab", ID: "a", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer lineA.Close()
	lineB, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "ab", ID: "b", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer lineB.Close()
	require.NoError(t, lineA.WaitSubscribers(ctx, 1))
	require.NoError(t, lineB.WaitSubscribers(ctx, 1))
	assert.NotEqual(t, lineA.IsHome(), lineB.IsHome(), "exactly one line holds the home")

	payload := make([]byte, tick.Size)
	for seq := uint64(1); seq <= 50; seq++ {
		first, second := lineA, lineB
		if seq%2 == 0 {
			first, second = lineB, lineA
		}
		got, err := first.PublishAt(seq, tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
		require.Equal(t, seq, got)
		_, err = second.PublishAt(seq, tick.MessageType, payload, time.Now().UnixNano())
		require.ErrorIs(t, err, ring.ErrLost, "the other line lost sequence %d", seq)
	}
	r.drain()
	require.Len(t, r.h.got, 50, "each sequence delivered once")
	for i, s := range r.h.got {
		assert.Equal(t, uint64(i+1), s)
	}
	assert.Equal(t, uint64(25), lineA.Stats().Lost)
	assert.Equal(t, uint64(25), lineB.Stats().Lost)
}

func TestPublisher_Publish_OversizeIsAClearErrorAndNothingIsPublished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "big")
	p, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "big", Idle: rdma.Yield{}})
	require.NoError(t, err)
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	assert.Equal(t, publisher.DefaultSlotSize-ring.SlotHeaderSize, p.MaxPayload())
	assert.Equal(t, 96, publisher.DefaultSlotSize, "a 56-byte tick and its header, rounded up to 32")

	_, err = p.Publish(7, make([]byte, p.MaxPayload()+1), time.Now().UnixNano())
	assert.ErrorIs(t, err, publisher.ErrTooLarge)
	_, err = p.PublishBatch([]ring.Tick{{Payload: make([]byte, 8)}, {Payload: make([]byte, 1000)}})
	assert.ErrorIs(t, err, publisher.ErrTooLarge)
	_, err = p.PublishAt(1, 7, make([]byte, 1000), 0)
	assert.ErrorIs(t, err, publisher.ErrTooLarge)
	bad := tick.Tick{}
	_, err = p.PublishTick(&bad)
	assert.ErrorIs(t, err, tick.ErrInvalid)

	seq, err := p.Publish(7, make([]byte, p.MaxPayload()), time.Now().UnixNano())
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq, "the refused messages claimed no sequence")
	r.drain()
	assert.Equal(t, []uint64{1}, r.h.got)

	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	_, err = p.Publish(7, nil, 0)
	assert.ErrorIs(t, err, ring.ErrClosed)
}

func TestPublisher_SubscriberWithdraws_IsDroppedAndPublishingGoesOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "drop")
	other, err := subscriber.New(ctx, r.node, r.devs, subscriber.Config{Topic: "drop", ID: "other", StatsInterval: -1, DrainQuiet: 20 * time.Millisecond}, nil)
	require.NoError(t, err)
	p, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "drop", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.WaitSubscribers(ctx, 2))
	require.NoError(t, other.Close())
	require.Eventually(t, func() bool { return p.Subscribers() == 1 }, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 100; i++ {
		_, err := p.Publish(1, []byte("x"), time.Now().UnixNano())
		require.NoError(t, err)
	}
	r.drain()
	assert.Len(t, r.h.got, 100)
}

func TestRunFeed_PacedBatchesArriveWhole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "feed")
	p, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "feed", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)

	_, err = publisher.RunFeed(ctx, p, feed, publisher.FeedRun{Batch: 1000})
	assert.ErrorIs(t, err, publisher.ErrInvalidConfig)

	res, err := publisher.RunFeed(ctx, p, feed, publisher.FeedRun{Rate: 2000, Duration: 300 * time.Millisecond, Batch: 4, Idle: rdma.Yield{}})
	require.NoError(t, err)
	require.Positive(t, res.Published)
	assert.Equal(t, uint64(1), res.First)
	assert.Equal(t, res.Published, res.Last)
	assert.Positive(t, res.Rate())
	r.drain()
	assert.Len(t, r.h.got, int(res.Published))
	c := r.sub.Counters()
	assert.Zero(t, c.Lost())
}
