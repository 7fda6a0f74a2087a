package subscriber_test

import (
	"context"
	"sync"
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

// byTopic keeps each topic's sequences and ticks apart.
type byTopic struct {
	mu     sync.Mutex
	seqs   map[string][]uint64
	instr  map[string][]uint64
	events map[string][]ring.Event
}

func (b *byTopic) OnTicks(topic string, ts []ring.Tick) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range ts {
		var tk tick.Tick
		if tick.Decode(t.Payload, &tk) == nil {
			b.seqs[topic] = append(b.seqs[topic], t.Seq)
			b.instr[topic] = append(b.instr[topic], tk.Instrument)
		}
	}
}

func (b *byTopic) OnEvent(topic string, ev ring.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events[topic] = append(b.events[topic], ev)
}

func (b *byTopic) count(topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seqs[topic])
}

func TestWildcard_ThreeTopicsOneLate_EachKeepsItsOwnSequence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := bus.Open(ctx, bus.Config{NodeID: "pubs"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := bus.Open(ctx, bus.Config{NodeID: "subs", NATS: bus.NATSConfig{URLs: []string{a.ClientURL()}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	devA, devB := link.NewDevices(link.DevicesConfig{HostID: a.HostID()}), link.NewDevices(link.DevicesConfig{HostID: b.HostID()})
	t.Cleanup(func() { _ = devA.Close() })
	t.Cleanup(func() { _ = devB.Close() })

	pub := func(topic string) *publisher.Publisher {
		p, err := publisher.New(ctx, a, devA, publisher.Config{Topic: topic, Idle: rdma.Yield{}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	send := func(p *publisher.Publisher, instrument uint64, n int) {
		for i := 0; i < n; i++ {
			tk := tick.Tick{Instrument: instrument, Kind: tick.Trade, Price: 1, Size: uint64(i + 1), PubTime: time.Now().UnixNano()}
			_, err := p.PublishTick(&tk)
			require.NoError(t, err)
		}
	}
	itch, ouch := pub("md.nasdaq.itch"), pub("md.nasdaq.ouch")
	other := pub("md.nyse.itch") // does not match
	require.Eventually(t, func() bool { return len(b.Topics()) >= 3 }, 10*time.Second, 5*time.Millisecond, "the subscriber's node hears of the topics")

	h := &byTopic{seqs: map[string][]uint64{}, instr: map[string][]uint64{}, events: map[string][]ring.Event{}}
	w, err := subscriber.NewWildcard(ctx, b, devB, subscriber.Config{Topic: "md.nasdaq.>", Mode: ring.Reliable, Idle: rdma.Yield{}, StatsInterval: -1}, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()

	late := pub("md.nasdaq.late") // created after the subscriber started
	for _, p := range []*publisher.Publisher{itch, ouch, late} {
		require.NoError(t, p.WaitSubscribers(ctx, 1))
	}
	const n = 500
	send(itch, 1, n)
	send(ouch, 2, n+1)
	send(late, 3, n+2)
	send(other, 4, 10)
	want := map[string]int{"md.nasdaq.itch": n, "md.nasdaq.ouch": n + 1, "md.nasdaq.late": n + 2}
	require.Eventually(t, func() bool {
		for topic, k := range want {
			if h.count(topic) < k {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"md.nasdaq.itch", "md.nasdaq.late", "md.nasdaq.ouch"}, w.Topics())
	require.NoError(t, w.Close())
	require.NoError(t, <-runErr)

	h.mu.Lock()
	defer h.mu.Unlock()
	instr := map[string]uint64{"md.nasdaq.itch": 1, "md.nasdaq.ouch": 2, "md.nasdaq.late": 3}
	for topic, k := range want {
		require.Len(t, h.seqs[topic], k, topic)
		for i, s := range h.seqs[topic] {
			require.Equal(t, uint64(i+1), s, "%s: its own sequence", topic)
			require.Equal(t, instr[topic], h.instr[topic][i], "%s: only its own ticks", topic)
		}
		assert.Empty(t, h.events[topic], topic)
	}
	assert.NotContains(t, h.seqs, "md.nyse.itch")
	assert.Equal(t, uint64(3*n+3), w.Counters().Received)
}

func TestWildcard_MiddleStar(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "one"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	t.Cleanup(func() { _ = devs.Close() })
	for _, topic := range []string{"md.nasdaq.itch", "md.nyse.itch", "md.nasdaq.csv", "md.x.y.itch"} {
		p, err := publisher.New(ctx, node, devs, publisher.Config{Topic: topic})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
	}
	h := &byTopic{seqs: map[string][]uint64{}, instr: map[string][]uint64{}, events: map[string][]ring.Event{}}
	w, err := subscriber.NewWildcard(ctx, node, devs, subscriber.Config{Topic: "md.*.itch", StatsInterval: -1}, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	require.Eventually(t, func() bool { return len(w.Topics()) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"md.nasdaq.itch", "md.nyse.itch"}, w.Topics())

	_, err = subscriber.NewWildcard(ctx, node, devs, subscriber.Config{Topic: "md.>.itch"}, h)
	assert.ErrorIs(t, err, subscriber.ErrInvalidConfig)
}
