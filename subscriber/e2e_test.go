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
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// testLease is the home lease of tests that are not about failover: with
// the 1 s default a loaded machine (CI runs every package at once on two
// cores) can miss renewals, and the home moves to a new epoch mid-test.
const testLease = 30 * time.Second

// testHeartbeat is their peers' heartbeat timeout, for the same reason: a
// home whose heartbeats a loaded host delays past the 2 s default is aged
// out, and its publishers fail over (ErrNoHome under -race).
const testHeartbeat = 10 * time.Second

type collect struct {
	mu     sync.Mutex
	seqs   []uint64
	events []ring.Event
	ticks  []tick.Tick
}

func (c *collect) OnTicks(ts []ring.Tick) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		c.seqs = append(c.seqs, t.Seq)
		var tk tick.Tick
		if t.Type == tick.MessageType && tick.Decode(t.Payload, &tk) == nil {
			c.ticks = append(c.ticks, tk)
		}
	}
}

func (c *collect) OnEvent(ev ring.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func TestPubSub_InProcess_DeliversEveryTickInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := bus.Open(ctx, bus.Config{NodeID: "a", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer a.Close()
	b, err := bus.Open(ctx, bus.Config{NodeID: "b", NATS: bus.NATSConfig{URLs: []string{a.ClientURL()}}, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer b.Close()
	devA, devB := link.NewDevices(link.DevicesConfig{HostID: a.HostID()}), link.NewDevices(link.DevicesConfig{HostID: b.HostID()})
	defer devA.Close()
	defer devB.Close()

	var c collect
	sub, err := subscriber.New(ctx, b, devB, subscriber.Config{Topic: "t1", Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()

	pub, err := publisher.New(ctx, a, devA, publisher.Config{Topic: "t1", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	const n = 2000
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	var tk tick.Tick
	for i := 0; i < n; i++ {
		feed.Next(&tk, time.Now().UnixNano())
		tk.PubTime = time.Now().UnixNano()
		seq, err := pub.PublishTick(&tk)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), seq)
	}
	require.Eventually(t, func() bool { return c.count() == n }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.seqs {
		require.Equal(t, uint64(i+1), s)
	}
	assert.Empty(t, c.events)
	assert.Len(t, c.ticks, n)
	got := sub.Counters()
	assert.Equal(t, uint64(n), got.Received)
	assert.Zero(t, got.Lost())
}

// counting is a handler that keeps nothing (no allocation per batch).
type counting struct{ ticks, events int }

func (c *counting) OnTicks(ts []ring.Tick) { c.ticks += len(ts) }
func (c *counting) OnEvent(ring.Event)     { c.events++ }

func TestPubSub_PublishAndPoll_AllocateNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "allocs", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var h counting
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "allocs", Slots: 1 << 12, StatsInterval: -1}, &h)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "allocs", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	var tk tick.Tick
	batch := make([]ring.Tick, 8)
	for i := range batch {
		batch[i] = ring.Tick{Type: tick.MessageType, Payload: make([]byte, tick.Size)}
	}
	// Warm up: the first polls and publishes may grow internal buffers.
	for i := 0; i < 100; i++ {
		feed.Next(&tk, 1)
		_, err := pub.PublishTick(&tk)
		require.NoError(t, err)
		sub.Poll()
	}
	var pubErr error
	allocs := testing.AllocsPerRun(2000, func() {
		feed.Next(&tk, 1)
		tk.PubTime = time.Now().UnixNano()
		if _, err := pub.PublishTick(&tk); err != nil {
			pubErr = err
		}
		for sub.Poll() > 0 {
		}
	})
	require.NoError(t, pubErr)
	assert.Zero(t, allocs, "Publish + Poll")

	allocs = testing.AllocsPerRun(500, func() {
		for i := range batch {
			batch[i].PublishNs = time.Now().UnixNano()
		}
		if _, err := pub.PublishBatch(batch); err != nil {
			pubErr = err
		}
		for sub.Poll() > 0 {
		}
	})
	require.NoError(t, pubErr)
	assert.Zero(t, allocs, "PublishBatch + Poll")

	var got ring.Tick
	buf := make([]byte, 128)
	allocs = testing.AllocsPerRun(1000, func() {
		if _, err := pub.Publish(tick.MessageType, batch[0].Payload, time.Now().UnixNano()); err != nil {
			pubErr = err
		}
		if ok, _, err := sub.ReadInto(&got, buf); !ok || err != nil {
			pubErr = err
		}
	})
	require.NoError(t, pubErr)
	assert.Zero(t, allocs, "Publish + ReadInto")
	assert.Zero(t, h.events)
	c := sub.Counters()
	assert.Zero(t, c.Lost())
	assert.Equal(t, uint64(h.ticks)+1000+1, c.Received, "ReadInto's ticks are counted too") // +1: AllocsPerRun's warm-up call
}

func TestSubscriber_Close_IsIdempotentAndCountersSurviveIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "closer", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var msgs []*stats.Message
	var mu sync.Mutex
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "closing", StatsInterval: 20 * time.Millisecond, DrainQuiet: 10 * time.Millisecond,
		OnStats: func(m *stats.Message) { mu.Lock(); msgs = append(msgs, m); mu.Unlock() }}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(msgs) >= 2 }, 10*time.Second, 5*time.Millisecond, "the stats loop runs")
	require.NoError(t, sub.Close())
	mu.Lock()
	last := msgs[len(msgs)-1]
	mu.Unlock()
	assert.Equal(t, "closing", last.Topic)
	assert.Equal(t, "closer", last.Subscriber, "the default id is the node's")
	require.NoError(t, sub.Close())
	assert.Zero(t, sub.Counters().Received)
	assert.ErrorIs(t, sub.Run(ctx), subscriber.ErrClosed)
}

func TestSubscriber_New_RejectsBadConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "bad", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	for _, c := range []subscriber.Config{{}, {Topic: "x", Provider: "udp"}, {Topic: "x", StatsInterval: time.Millisecond}, {Topic: "x", Slots: 3}} {
		_, err := subscriber.New(ctx, node, devs, c, nil)
		assert.Error(t, err, "%+v", c)
	}
	_, err = publisher.New(ctx, node, devs, publisher.Config{Topic: "x", SlotSize: 64})
	assert.ErrorIs(t, err, publisher.ErrInvalidConfig)
}

// A reliable ring much smaller than the stream and a subscriber that polls
// slowly: the publisher waits for room, nothing is lost.
func TestPubSub_Reliable_SlowSubscriberLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "rel", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var c collect
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "rel", Mode: ring.Reliable, Slots: 16, MaxBatch: 4,
		Idle: rdma.NewBackoff(), StatsInterval: -1}, &c)
	require.NoError(t, err)
	slow := make(chan struct{})
	go func() {
		defer close(slow)
		for c.count() < 500 && ctx.Err() == nil {
			sub.Poll()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	defer func() { cancel(); <-slow }() // a failed publish: no Poll left running into the devices' Close
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "rel", Idle: rdma.Yield{}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	for i := 0; i < 500; i++ {
		_, err := pub.Publish(tick.MessageType, []byte("reliable"), time.Now().UnixNano())
		require.NoError(t, err)
	}
	<-slow
	require.NoError(t, sub.Close())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.seqs, 500)
	for i, s := range c.seqs {
		require.Equal(t, uint64(i+1), s)
	}
	assert.Empty(t, c.events)
	assert.Zero(t, pub.Stats().BackPressure)
}

func TestPubSub_Reliable_AttachesCreditCellAndJournal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "relc", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var c collect
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "relc", Mode: ring.Reliable, Slots: 64, StatsInterval: -1}, &c)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "relc", Idle: rdma.Yield{}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.Counters().Credits == 1 }, 10*time.Second, 5*time.Millisecond,
		"the reliable reader writes its position into the publisher's credit cell")
	require.Eventually(t, func() bool { return sub.Counters().JournalEpoch == pub.Epoch() }, 10*time.Second, 5*time.Millisecond,
		"the home's journal is attached by default")
	for i := 0; i < 1000; i++ { // 15 laps of the ring: only credits let it through
		_, err := pub.Publish(tick.MessageType, []byte("reliable"), time.Now().UnixNano())
		require.NoError(t, err)
		sub.Poll()
	}
	for c.count() < 1000 && ctx.Err() == nil {
		sub.Poll()
	}
	require.Equal(t, 1000, c.count(), "the reliable reader received every tick before the deadline: %+v", sub.Counters())
	assert.Empty(t, c.events)
}

// A subscriber created while the topic runs starts at the home's counter:
// it receives from then on and loses nothing.
func TestPubSub_LateSubscriber_StartsAtTheHomesCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "late", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	first, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "late", ID: "first", StatsInterval: -1, Idle: rdma.Yield{}}, nil)
	require.NoError(t, err)
	go func() { _ = first.Run(ctx) }()
	defer first.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "late", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	stop := make(chan struct{})
	published := make(chan uint64, 1)
	stopPub := sync.OnceValue(func() uint64 { close(stop); return <-published })
	defer stopPub() // a failed wait: no Publish left running into pub.Close
	go func() {
		var n uint64
		defer func() { published <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := pub.Publish(1, []byte("tick"), time.Now().UnixNano()); err != nil {
				return
			}
			n++
			time.Sleep(100 * time.Microsecond)
		}
	}()
	require.Eventually(t, func() bool { return first.Counters().Received > 2000 }, 20*time.Second, time.Millisecond)

	var c collect
	late, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "late", ID: "late", StatsInterval: -1, Idle: rdma.Yield{}}, &c)
	require.NoError(t, err)
	go func() { _ = late.Run(ctx) }()
	require.Eventually(t, func() bool { return c.count() > 500 }, 20*time.Second, time.Millisecond, "the late subscriber receives: %+v", late.Counters())
	n := stopPub()
	require.NoError(t, late.Close())
	lc := late.Counters()
	assert.Greater(t, lc.StartedAt, uint64(2000))
	assert.GreaterOrEqual(t, lc.JoinedAt, lc.StartedAt)
	assert.GreaterOrEqual(t, lc.BeforeJoin, lc.JoinedAt-lc.StartedAt,
		"what was claimed between learning the counter and being added is counted as lost while joining")
	assert.Equal(t, n, lc.Next-1, "it read to the end: %+v", lc)
	assert.Equal(t, lc.Next-lc.JoinedAt, lc.Received, "every tick from its first on: %+v", lc)
	assert.Zero(t, lc.Lost(), "%+v", lc)
}

// A publisher that closes takes its queue pairs to the ring with it: the
// subscriber keys them as the bus names the publisher (its node and its
// id, not the ring's id), so publisherGone finds and closes them.
func TestPubSub_PublisherClosed_ItsQueuePairsGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "gone", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "gone", ID: "ring-id", StatsInterval: -1}, nil)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "gone", ID: "pub-id", Idle: rdma.Yield{}})
	require.NoError(t, err)
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.Publishers() == 1 }, 20*time.Second, 5*time.Millisecond, "the publisher connected")
	require.NoError(t, pub.Close())
	require.Eventually(t, func() bool { return sub.Publishers() == 0 }, 20*time.Second, 5*time.Millisecond,
		"the closed publisher's queue pairs are still held: %d publishers", sub.Publishers())
}

// Every delivered tick's latency reaches the stats exactly once, whether
// the loop went idle between ticks (the latencies of one poll are recorded
// by the next), delivered batches back to back, or read with ReadInto; the
// last poll's are in the final stats that Close publishes.
func TestSubscriber_RecordsOneLatencyPerDeliveredTick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "lat", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var (
		mu     sync.Mutex
		counts uint64
	)
	onStats := func(m *stats.Message) {
		h, err := m.LatencyHistogram()
		if err == nil {
			mu.Lock()
			counts += uint64(h.TotalCount())
			mu.Unlock()
		}
	}
	var h counting
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "lat", StatsInterval: 20 * time.Millisecond,
		DrainQuiet: 10 * time.Millisecond, OnStats: onStats}, &h)
	require.NoError(t, err)
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "lat", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	payload := make([]byte, tick.Size)
	batch := make([]ring.Tick, 300) // more than a poll's batch (256)
	for i := range batch {
		batch[i] = ring.Tick{Type: tick.MessageType, Payload: payload}
	}
	want := uint64(0)
	for round := 0; round < 20; round++ {
		now := time.Now().UnixNano()
		if round%2 == 0 {
			_, err = pub.Publish(tick.MessageType, payload, now)
			want++
		} else {
			for i := range batch {
				batch[i].PublishNs = now
			}
			_, err = pub.PublishBatch(batch[:min(len(batch), 64)])
			want += 64
		}
		require.NoError(t, err)
		for uint64(h.ticks) < want && ctx.Err() == nil {
			sub.Poll()
		}
	}
	var got ring.Tick
	buf := make([]byte, 128)
	for range 5 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
		for ctx.Err() == nil {
			if ok, _, err := sub.ReadInto(&got, buf); ok || err != nil {
				require.NoError(t, err)
				break
			}
		}
		want++
	}
	require.NoError(t, sub.Close())
	c := sub.Counters()
	assert.Equal(t, want, c.Received)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, counts, "one latency per delivered tick in the stats, the last poll's included")
}
