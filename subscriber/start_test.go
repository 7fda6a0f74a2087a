package subscriber

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// A ring joining a running topic delivers nothing while a publisher's
// connect is still learning the start (learnStart in flight): it waits at
// 1 until then, and polling meanwhile would recover the topic's earlier
// ticks from the journal, or name them a gap, and join at 1 (the CLI's
// cluster test saw its late subscriber join at 1 when a second publisher
// connected before the poller had moved the ring to the start the first
// one taught it). Once no start is being learnt, the ring starts at the
// home's counter and delivers from there, nothing counted lost.
func TestJoin_WhileAStartIsLearnt_DeliversNothingThenStartsAtTheCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := testlog.OnFailure(t)
	node, err := bus.Open(ctx, bus.Config{NodeID: "learn", LeaseTTL: 10 * time.Second, Logger: log})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "learn", Idle: rdma.Yield{}, Timeout: 10 * time.Second, Logger: *log})
	require.NoError(t, err)
	defer pub.Close()
	payload := make([]byte, tick.Size)
	for range 100 { // before the subscriber: in the journal only
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	var h countTicks
	sub, err := New(ctx, node, devs, Config{Topic: "learn", Slots: 1024, StatsInterval: -1, GapTimeout: 10 * time.Millisecond, Logger: *log}, &h)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.journalAt.Load() != 0 }, 10*time.Second, time.Millisecond, "the journal is attached")
	require.Equal(t, uint64(101), sub.startAt.Load(), "the connect learnt the home's counter")

	sub.accepting.Add(1) // another publisher's connect, learning the start
	for range 10 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		sub.Poll()
	}
	assert.Zero(t, h.n, "nothing delivered while a start is being learnt")
	sub.accepting.Add(-1)
	require.Eventually(t, func() bool { sub.Poll(); return h.n >= 10 }, 10*time.Second, time.Millisecond)
	for range 1000 {
		sub.Poll()
	}
	c := sub.Counters()
	assert.Equal(t, uint64(101), c.JoinedAt, "joined at the counter it learnt")
	assert.Equal(t, uint64(10), c.Received)
	assert.Zero(t, c.BeforeJoin, "nothing passed over: the ring started where the publisher began writing into it")
	assert.Zero(t, c.Lost())
}

// slowHome makes the topic's home tell no counter while slow is set: each
// ask waits out its context, as a home on a starved host does.
func slowHome(t *testing.T) *atomic.Bool {
	var slow atomic.Bool
	slow.Store(true)
	t.Cleanup(setAskHook(func(s *Subscriber, ctx context.Context, n bus.PeerInfo) (homeCounter, error) {
		if slow.Load() {
			<-ctx.Done()
			return homeCounter{}, ctx.Err()
		}
		return s.askCounter(ctx, n)
	}))
	return &slow
}

// learnRig is a node with a publisher that published 100 ticks (in its
// journal only) and a subscriber joining after them, logging to logs.
func learnRig(t *testing.T, ctx context.Context, logs *testlog.Buf) (*publisher.Publisher, *Subscriber, *countTicks) {
	t.Helper()
	log := testlog.OnFailure(t)
	node, err := bus.Open(ctx, bus.Config{NodeID: "late-learn", LeaseTTL: 10 * time.Second, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	t.Cleanup(func() { _ = devs.Close() })
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "late-learn", Idle: rdma.Yield{}, Timeout: 10 * time.Second, Logger: *log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	payload := make([]byte, tick.Size)
	for range 100 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	var h countTicks
	sublog := zerolog.New(logs).Level(zerolog.InfoLevel)
	sub, err := New(ctx, node, devs, Config{Topic: "late-learn", Slots: 1024, StatsInterval: -1, GapTimeout: 10 * time.Millisecond,
		Logger: sublog}, &h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return pub, sub, &h
}

// A home that does not tell its counter within learnWait (a starved
// host, -race at load 25): the publisher is answered and adds the ring,
// which stays held, delivering nothing, while the subscriber asks again in
// the background; when the home answers, the ring starts at the first tick
// the publisher wrote into it meanwhile, below the counter: those ticks are
// delivered, not passed over, and the journal's earlier ones are not.
// (It first started at 1 after the wait: the journal's 100 earlier ticks
// were delivered and the ring joined at 1. Then at the counter: the ticks
// written into the held ring were passed over, counted nowhere.)
func TestJoin_HomeSlowToTellItsCounter_RingHeldThenStartsAtWhatWasWrittenIntoIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slow := slowHome(t)
	var logs testlog.Buf
	pub, sub, h := learnRig(t, ctx, &logs)
	require.NoError(t, pub.WaitSubscribers(ctx, 1), "the publisher is answered although the home did not tell its counter")
	payload := make([]byte, tick.Size)
	for range 10 { // 101..110: written into the held ring
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		sub.Poll()
	}
	assert.Zero(t, h.n, "nothing delivered while the start is unknown")
	assert.Zero(t, sub.Counters().JoinedAt)

	slow.Store(false)
	require.Eventually(t, func() bool { return sub.accepting.Load() == 0 }, 20*time.Second, time.Millisecond, "the start is learnt in the background")
	assert.Equal(t, uint64(111), sub.startAt.Load(), "the home's counter when it answered")
	for range 10 { // 111..120
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { sub.Poll(); return h.n >= 20 }, 10*time.Second, time.Millisecond)
	for range 1000 {
		sub.Poll()
	}
	c := sub.Counters()
	assert.Equal(t, uint64(101), c.JoinedAt, "joined at the first tick written into the held ring, not at 1 nor at the counter")
	assert.Equal(t, uint64(20), c.Received, "the ten written while held and the ten after")
	assert.Zero(t, c.Lost())
	assert.Zero(t, c.BeforeJoin)
	assert.Contains(t, logs.String(), "learnt the topic's home's counter late", "the late start is logged\n%s", logs.String())
}

// A home that never tells its counter: after learnGiveUp the ring is let
// go at 1, as with no home at all, and says so; it is not held forever.
func TestJoin_HomeNeverTellsItsCounter_RingStartsAt1AfterGivingUpAndSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slowHome(t)
	giveUp := learnGiveUp
	learnGiveUp = time.Second
	t.Cleanup(func() { learnGiveUp = giveUp })
	var logs testlog.Buf
	pub, sub, h := learnRig(t, ctx, &logs)
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.accepting.Load() == 0 }, 20*time.Second, time.Millisecond, "the learner gave up")
	assert.Contains(t, logs.String(), "never told its counter", "giving up is logged\n%s", logs.String())
	payload := make([]byte, tick.Size)
	for range 10 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { sub.Poll(); return h.n > 0 }, 10*time.Second, time.Millisecond, "the ring delivers again")
}

// landStamp stores seq as the stamp of seq's slot in s's ring: the last
// WRITE of a tick of seq landing there.
func landStamp(s *Subscriber, seq uint64) {
	b := s.ring.Region().Bytes()
	off := ring.RegionHeaderSize + int(seq&uint64(s.cfg.Slots-1))*s.cfg.SlotSize
	(*atomic.Uint64)(unsafe.Pointer(&b[off])).Store(seq)
}

// A tick claimed below the ring's start lands after the start was chosen
// (its publish was under way when its publisher added the ring, or its
// WRITE in flight): the ring has passed its sequence and cannot deliver
// it in order. It is counted in BeforeJoin, not lost in silence (it was
// counted nowhere), and not in Lost: it was published before this ring
// joined.
func TestJoin_ATickLandingBelowTheStartAfterIt_IsCountedInBeforeJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs testlog.Buf
	pub, sub, h := learnRig(t, ctx, &logs)
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Equal(t, uint64(101), sub.startAt.Load(), "the connect learnt the home's counter")
	payload := make([]byte, tick.Size)
	for range 10 { // 101..110
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { sub.Poll(); return h.n >= 10 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, sub.Counters().BeforeJoin)

	landStamp(sub, 100)
	require.Eventually(t, func() bool { sub.Poll(); return sub.Counters().BeforeJoin == 1 }, 10*time.Second, time.Millisecond,
		"the tick that landed below the start is counted")
	for range 1000 {
		sub.Poll()
	}
	c := sub.Counters()
	assert.Equal(t, uint64(1), c.BeforeJoin, "counted once")
	assert.Equal(t, uint64(101), c.JoinedAt)
	assert.Equal(t, uint64(10), c.Received, "only the ten ticks from the start on are delivered")
	assert.Zero(t, c.Lost())
}
