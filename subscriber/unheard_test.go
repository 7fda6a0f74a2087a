package subscriber_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// natsLink is a TCP relay between one node and its NATS server: Cut closes
// it (the node's connection drops and its reconnects are refused, as when
// its server dies and it has no other), Restore listens again on the same
// port. The node's data plane does not go through it.
type natsLink struct {
	t      *testing.T
	addr   string // where the node dials
	target string // the server

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newNATSLink(t *testing.T, target string) *natsLink {
	t.Helper()
	l := &natsLink{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.addr = ln.Addr().String()
	l.serve(ln)
	t.Cleanup(l.Cut)
	return l
}

func (l *natsLink) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", l.target)
			if err != nil {
				c.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, c, s)
			l.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

// Cut closes the listener and every relayed connection. Idempotent.
func (l *natsLink) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// Restore listens on the same address again.
func (l *natsLink) Restore() {
	var ln net.Listener
	var err error
	for i := 0; i < 100; i++ { // the port was ours a moment ago
		if ln, err = net.Listen("tcp", l.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(l.t, err)
	l.serve(ln)
}

// awayRig is a publisher's node a (with the NATS server) and a
// subscriber's node b that reaches it only through a natsLink, with short
// heartbeats: cutting the link makes a lose b within a second while
// both processes, and the shm queue pair between them, stay up. holdA is
// a's bus.Config.UnheardHold (0: the default; negative: a drops an
// unheard subscriber at once).
type awayRig struct {
	a, b     *bus.Node
	link     *natsLink
	devA     *link.Devices
	devB     *link.Devices
	c        collect
	sub      *subscriber.Subscriber
	runErr   chan error
	feed     *publisher.Feed
	sequence uint64
	// lastStats is the subscriber's last stats message (only Close's: the
	// interval is an hour)
	lastStats atomic.Pointer[stats.Message]
}

func newAwayRig(t *testing.T, ctx context.Context, holdA time.Duration, subOpts ...func(*subscriber.Config)) *awayRig {
	t.Helper()
	hb := func(id string) bus.Config {
		return bus.Config{NodeID: id, LeaseTTL: testLease, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: time.Second}
	}
	r := &awayRig{runErr: make(chan error, 1)}
	var err error
	ca := hb("a")
	ca.UnheardHold = holdA
	r.a, err = bus.Open(ctx, ca)
	require.NoError(t, err)
	t.Cleanup(func() { r.a.Close() })
	u, err := url.Parse(r.a.ClientURL())
	require.NoError(t, err)
	r.link = newNATSLink(t, u.Host)
	u.Host = r.link.addr
	cb := hb("b")
	cb.NATS = bus.NATSConfig{URLs: []string{u.String()}, ReconnectWait: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
	r.b, err = bus.Open(ctx, cb)
	require.NoError(t, err)
	t.Cleanup(func() { r.b.Close() })
	r.devA, r.devB = link.NewDevices(link.DevicesConfig{HostID: r.a.HostID()}), link.NewDevices(link.DevicesConfig{HostID: r.b.HostID()})
	t.Cleanup(func() { r.devA.Close(); r.devB.Close() })
	sc := subscriber.Config{Topic: "away", Idle: rdma.Yield{}, StatsInterval: time.Hour,
		OnStats: func(m *stats.Message) { r.lastStats.Store(m) }}
	for _, o := range subOpts {
		o(&sc)
	}
	r.sub, err = subscriber.New(ctx, r.b, r.devB, sc, &r.c)
	require.NoError(t, err)
	go func() { r.runErr <- r.sub.Run(ctx) }()
	r.feed, err = publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	return r
}

func (r *awayRig) publish(t *testing.T, pub *publisher.Publisher, n int) {
	t.Helper()
	var tk tick.Tick
	for i := 0; i < n; i++ {
		r.feed.Next(&tk, time.Now().UnixNano())
		seq, err := pub.PublishTick(&tk)
		require.NoError(t, err)
		r.sequence++
		require.Equal(t, r.sequence, seq)
	}
}

// dropSubscriber, on a rig whose node a drops an unheard subscriber at
// once (holdA < 0), starts a publisher with no journal (nothing to recover
// the tail from, nor a counter to READ), publishes 300 ticks, cuts b's link until the publisher has
// dropped b, and publishes 200 more to nobody. (A bus starved by the rest
// of a CI run may lose b before the cut, and the publisher drops it then:
// the callers' checks hold either way.)
func (r *awayRig) dropSubscriber(t *testing.T, ctx context.Context) *publisher.Publisher {
	t.Helper()
	pub, err := publisher.New(ctx, r.a, r.devA, publisher.Config{Topic: "away", Idle: rdma.Yield{}, JournalSlots: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	r.publish(t, pub, 300)
	require.Eventually(t, func() bool { return r.c.count() == 300 || pub.Subscribers() == 0 }, 20*time.Second, 5*time.Millisecond)
	r.link.Cut()
	require.Eventually(t, func() bool { return pub.Subscribers() == 0 }, 20*time.Second, 10*time.Millisecond, "the publisher kept the subscriber")
	r.publish(t, pub, 200) // to nobody: b's ring was dropped
	return pub
}

// closeAndAccount closes the subscriber and checks that its lost count is
// published minus delivered, and that its ticks and events name every
// sequence published exactly once, in order. It returns the counters.
func (r *awayRig) closeAndAccount(t *testing.T) subscriber.Counters {
	t.Helper()
	return closeAndAccount(t, r.sub, r.runErr, &r.c, r.sequence)
}

// closeAndAccount closes sub (whose Run returns on runErr) and checks that
// its lost count is published minus delivered and that the ticks and
// events c collected name every sequence 1..published exactly once.
func closeAndAccount(t *testing.T, sub *subscriber.Subscriber, runErr <-chan error, c *collect, published uint64) subscriber.Counters {
	t.Helper()
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	got := sub.Counters()
	assert.Equal(t, published-got.Received, got.Lost(), "lost is published minus delivered")
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.NoError(t, accountedIn(c.seqs, c.events, 1, published))
	return got
}

// hears reports whether node n lists peer id.
func hears(n *bus.Node, id string) bool {
	return slices.ContainsFunc(n.Peers(), func(p bus.PeerInfo) bool { return p.ID == id })
}

// A subscriber's node away from NATS (its connection gone, its server
// unreachable) for longer than the heartbeat timeout is lost to the
// publisher's bus, but not to the data plane: the publisher keeps its
// queue pair while it is up, so every tick published meanwhile arrives,
// and when the node is heard again it is the same subscriber, no new
// connection, nothing twice. The subscriber's lost count is published
// minus delivered: zero. (Before, the publisher dropped the queue pair
// when the heartbeats stopped, and the subscriber got nothing more and
// counted nothing lost.)
func TestPubSub_SubscriberNodeAwayFromNATS_GetsEveryTick(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newAwayRig(t, ctx, 0)
	var logs testlog.Buf
	pub, err := publisher.New(ctx, r.a, r.devA, publisher.Config{Topic: "away", Idle: rdma.Yield{}, Logger: zerolog.New(&logs),
		JournalSlots: -1}) // no journal: the ring's reader would recover from it what the publisher no longer wrote
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	r.publish(t, pub, 300)
	require.Eventually(t, func() bool { return r.c.count() == 300 }, 20*time.Second, 5*time.Millisecond)

	r.link.Cut()
	require.Eventually(t, func() bool { return !hears(r.a, "b") }, 20*time.Second, 10*time.Millisecond, "a still hears b")
	require.False(t, r.b.Connected(), "b reconnected to NATS although its link is cut")
	// the publisher has been told (kept it, or, as before, dropped it)
	require.Eventually(t, func() bool {
		return logs.Count("subscriber's node unheard on NATS") > 0 || logs.Count("subscriber gone; dropped its queue pair") > 0
	}, 20*time.Second, 5*time.Millisecond)
	r.publish(t, pub, 300) // while b is unheard
	require.Eventually(t, func() bool { return r.c.count() == 600 }, 20*time.Second, 5*time.Millisecond,
		"the ticks published while b was away from NATS did not all arrive (%d of 600)", r.c.count())
	assert.Equal(t, 1, pub.Subscribers(), "the publisher dropped the subscriber of a node only unheard")

	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() && hears(r.a, "b") }, 20*time.Second, 10*time.Millisecond, "b not heard again")
	r.publish(t, pub, 300)
	require.Eventually(t, func() bool { return r.c.count() == 900 }, 20*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, pub.Subscribers())
	assert.Zero(t, pub.Stats().Dropped, "a queue pair was dropped")
	assert.Zero(t, pub.UnheardDrops())
	assert.Equal(t, 1, r.sub.Publishers(), "the subscriber has more or fewer than the one publisher's queue pairs")

	require.NoError(t, r.sub.Close())
	require.NoError(t, <-r.runErr)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for i, s := range r.c.seqs {
		require.Equal(t, uint64(i+1), s, "tick %d out of order or twice", i)
	}
	assert.Empty(t, r.c.events)
	got := r.sub.Counters()
	assert.Equal(t, uint64(900), got.Received)
	assert.Zero(t, got.Recovered)
	assert.Equal(t, r.sequence-got.Received, got.Lost(), "lost is published minus delivered")
}

// A publisher that drops the subscriber of a node it cannot hear
// (UnheardHold < 0: at once, as every publisher did before) and goes on
// publishing, then closes, leaves the subscriber short of the topic's
// counter with nothing after the hole. The subscriber names the missing
// range once its node is back on NATS (the closing home's record carries
// the counter it ended at): lost is published minus delivered, told as
// one gap event. (Before, it ended with lost 0 and no event.)
func TestPubSub_DroppedSubscriber_NamesTheTailItNeverGot(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newAwayRig(t, ctx, -1)
	pub := r.dropSubscriber(t, ctx)
	require.NoError(t, pub.Close())

	r.link.Restore()
	require.Eventually(t, func() bool { return r.sub.Counters().Next > r.sequence }, 20*time.Second, 10*time.Millisecond,
		"the subscriber never passed the tail (at %d of %d)", r.sub.Counters().Next, r.sequence)
	got := r.closeAndAccount(t)
	assert.Less(t, got.Received, r.sequence, "the dropped subscriber received every tick")
	if got.Received == 300 { // the usual case: dropped at the cut
		r.c.mu.Lock()
		defer r.c.mu.Unlock()
		assert.Equal(t, []ring.Event{{Kind: ring.EventGap, From: 301, To: 500}}, r.c.events)
	}
}

// accountedIn checks that seqs (delivered, in order) and events together
// name every sequence from..to exactly once, in increasing order.
func accountedIn(seqs []uint64, events []ring.Event, from, to uint64) error {
	next, si, ei := from, 0, 0
	for next <= to {
		switch {
		case si < len(seqs) && seqs[si] == next:
			si++
			next++
		case ei < len(events) && events[ei].From == next && events[ei].To >= next:
			next = events[ei].To + 1
			ei++
		default:
			return fmt.Errorf("sequence %d neither delivered once nor named (%d ticks, events %v)", next, len(seqs), events)
		}
	}
	if si != len(seqs) || ei != len(events) || next != to+1 {
		return fmt.Errorf("delivered or named past %d: ticks %d of %d, events %d of %d", to, si, len(seqs), ei, len(events))
	}
	return nil
}

// The same dropped subscriber when no home answers at Close (and no ended
// epoch is known): it cannot name what it never got, and says so in its
// log rather than closing as if its last tick were the topic's end.
func TestPubSub_DroppedSubscriber_HomeSilentAtClose_SaysTheTailCannotBeNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(subscriber.NoAskOnReconnect())
	var logs testlog.Buf
	r := newAwayRig(t, ctx, -1, func(c *subscriber.Config) { c.GapTimeout = time.Minute; c.Logger = zerolog.New(&logs) })
	r.dropSubscriber(t, ctx)
	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() }, 20*time.Second, 10*time.Millisecond)

	t.Cleanup(subscriber.SilentHome())
	require.NoError(t, r.sub.Close())
	require.NoError(t, <-r.runErr)
	got := r.sub.Counters()
	assert.Less(t, got.Received, r.sequence, "the dropped subscriber received every tick")
	assert.Equal(t, 1, logs.Count("ticks published after the last one delivered cannot be named"), "the unnamed tail was not logged\n%s", logs.String())
	assert.True(t, got.TailUnknown, "Counters say the tail could not be named: %+v", got)
	m := r.lastStats.Load()
	require.NotNil(t, m, "Close published no stats")
	assert.True(t, m.TailUnknown, "the last stats message says the tail could not be named")
	assert.Zero(t, m.Tail)
}

// A held subscriber whose queue pair then fails (here its process closes
// the subscriber while its node is still away from NATS, as a host that
// dies closes every queue pair) is dropped at once, counted and logged:
// the hold lasts only as long as the data plane does.
func TestPubSub_UnheardSubscriberWhoseQueuePairFails_IsDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newAwayRig(t, ctx, 0)
	var logs testlog.Buf
	pub, err := publisher.New(ctx, r.a, r.devA, publisher.Config{Topic: "away", Idle: rdma.Yield{}, Logger: zerolog.New(&logs)})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	r.publish(t, pub, 100)
	require.Eventually(t, func() bool { return r.c.count() == 100 }, 20*time.Second, 5*time.Millisecond)

	held := logs.Count("subscriber's node unheard on NATS") // (a starved bus may have lost b, and heard it again, before the cut)
	r.link.Cut()
	require.Eventually(t, func() bool { return logs.Count("subscriber's node unheard on NATS") > held }, 20*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, pub.Subscribers())
	require.NoError(t, r.sub.Close()) // its queue pairs close; its withdrawal cannot reach the bus
	require.NoError(t, <-r.runErr)
	require.Eventually(t, func() bool {
		r.publish(t, pub, 1) // a failed queue pair is dropped, not an error
		return pub.Subscribers() == 0
	}, 20*time.Second, 5*time.Millisecond, "the publisher still writes to a subscriber whose queue pair failed")
	// The writer drops the failed queue pair as it publishes (Subscribers
	// reads 0 then); the bus's hold sees the failure on its next check and
	// only then counts and logs the drop.
	require.Eventually(t, func() bool {
		return logs.Count("dropped a subscriber whose node is unheard on NATS") > 0
	}, 20*time.Second, 5*time.Millisecond, "the drop was not logged")
	assert.Equal(t, uint64(1), pub.UnheardDrops())
}

// A subscriber dropped by a publisher that lives on but publishes nothing
// after the hole (no journal, no closing record) has nothing to tell it
// of the tail while it runs; at Close it asks the home for the counter
// (before it withdraws) and names what it never got: lost is published
// minus delivered, and with a gap timeout longer than Close's drain the
// range is named by Close itself (Counters.Tail), which its last stats
// message carries. (Before, it closed with lost 0.)
func TestPubSub_DroppedSubscriber_NamesTheTailAtClose(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(subscriber.NoAskOnReconnect())                                               // what Close does by itself (the question on reconnect has a test of its own)
	r := newAwayRig(t, ctx, -1, func(c *subscriber.Config) { c.GapTimeout = time.Minute }) // Close's drain names no gap
	r.dropSubscriber(t, ctx)
	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() }, 20*time.Second, 10*time.Millisecond)

	got := r.closeAndAccount(t)
	assert.Less(t, got.Received, r.sequence, "the dropped subscriber received every tick")
	assert.Equal(t, r.sequence-got.Received, got.Tail, "not named at Close: %+v", got)
	assert.False(t, got.TailUnknown, "the home answered: the tail was named, not unknown: %+v", got)
	m := r.lastStats.Load()
	require.NotNil(t, m, "Close published no stats")
	assert.Equal(t, got.Tail, m.Tail, "the last stats message does not carry the tail")
	assert.False(t, m.TailUnknown)
	assert.Equal(t, got.Received, m.Received)
}

// The same with the home record not yet at the subscriber when it closes
// (its watcher slow under load, or not restarted since the node came
// back): Close still asks, every known publisher's node, and names the
// tail. (Before, it returned at once, and closed with the tail 0 and not
// unknown: silent. A run of the test above, under load, once closed so.)
func TestPubSub_DroppedSubscriber_NoHomeRecordYet_StillNamesTheTailAtClose(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(subscriber.NoAskOnReconnect())
	r := newAwayRig(t, ctx, -1, func(c *subscriber.Config) { c.GapTimeout = time.Minute })
	r.dropSubscriber(t, ctx)
	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() }, 20*time.Second, 10*time.Millisecond)

	subscriber.ForgetHome(r.sub)
	got := r.closeAndAccount(t)
	assert.Less(t, got.Received, r.sequence, "the dropped subscriber received every tick")
	assert.Equal(t, r.sequence-got.Received, got.Tail, "not named at Close: %+v", got)
	assert.False(t, got.TailUnknown, "%+v", got)
}

// pubAwayRig is awayRig the other way round: the subscriber's node a
// (with the NATS server; holdA its bus.Config.UnheardHold) and the
// publisher's node b, which reaches NATS only through a natsLink.
type pubAwayRig struct {
	a, b      *bus.Node
	link      *natsLink
	c         collect
	logs      testlog.Buf // the subscriber's
	sub       *subscriber.Subscriber
	runErr    chan error
	pub       *publisher.Publisher
	feed      *publisher.Feed
	published uint64
}

func newPubAwayRig(t *testing.T, ctx context.Context, holdA time.Duration) *pubAwayRig {
	t.Helper()
	cfg := func(id string) bus.Config {
		return bus.Config{NodeID: id, LeaseTTL: testLease, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: time.Second}
	}
	r := &pubAwayRig{runErr: make(chan error, 1)}
	ca := cfg("a")
	ca.UnheardHold = holdA
	var err error
	r.a, err = bus.Open(ctx, ca) // the subscriber's, with the server
	require.NoError(t, err)
	t.Cleanup(func() { r.a.Close() })
	u, err := url.Parse(r.a.ClientURL())
	require.NoError(t, err)
	r.link = newNATSLink(t, u.Host)
	u.Host = r.link.addr
	cb := cfg("b")
	cb.NATS = bus.NATSConfig{URLs: []string{u.String()}, ReconnectWait: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
	r.b, err = bus.Open(ctx, cb) // the publisher's, through the link
	require.NoError(t, err)
	t.Cleanup(func() { r.b.Close() })
	devA, devB := link.NewDevices(link.DevicesConfig{HostID: r.a.HostID()}), link.NewDevices(link.DevicesConfig{HostID: r.b.HostID()})
	t.Cleanup(func() { devA.Close(); devB.Close() })
	r.sub, err = subscriber.New(ctx, r.a, devA, subscriber.Config{Topic: "away", Idle: rdma.Yield{}, StatsInterval: -1, Logger: zerolog.New(&r.logs)}, &r.c)
	require.NoError(t, err)
	go func() { r.runErr <- r.sub.Run(ctx) }()
	r.pub, err = publisher.New(ctx, r.b, devB, publisher.Config{Topic: "away", Idle: rdma.Yield{}, JournalSlots: -1})
	require.NoError(t, err)
	t.Cleanup(func() { r.pub.Close() })
	require.NoError(t, r.pub.WaitSubscribers(ctx, 1))
	r.feed, err = publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	return r
}

func (r *pubAwayRig) publish(t *testing.T, n int) {
	t.Helper()
	var tk tick.Tick
	for i := 0; i < n; i++ {
		r.feed.Next(&tk, time.Now().UnixNano())
		seq, err := r.pub.PublishTick(&tk)
		require.NoError(t, err)
		r.published++
		require.Equal(t, r.published, seq)
	}
}

// cut cuts b's link and waits until a has lost b and the subscriber has
// been told (held it, or dropped it).
func (r *pubAwayRig) cut(t *testing.T) {
	t.Helper()
	r.link.Cut()
	require.Eventually(t, func() bool { return !hears(r.a, "b") }, 20*time.Second, 10*time.Millisecond, "a still hears b")
	require.Eventually(t, func() bool {
		return r.logs.Count("publisher's node unheard on NATS") > 0 || r.logs.Count("subscriber: publisher gone") > 0
	}, 20*time.Second, 5*time.Millisecond)
}

func (r *pubAwayRig) closeAndAccount(t *testing.T) subscriber.Counters {
	t.Helper()
	return closeAndAccount(t, r.sub, r.runErr, &r.c, r.published)
}

// The other way round: the publisher's node is away from NATS. The
// subscriber's bus loses it, but its queue pairs are up, so the
// subscriber keeps them (before, it closed them: the publisher's writes
// failed, and it could not reconnect without NATS): every tick published
// meanwhile arrives, and after the node is heard again nothing is lost,
// twice or out of order.
func TestPubSub_PublisherNodeAwayFromNATS_SubscriberKeepsItsQueuePairs(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newPubAwayRig(t, ctx, 0)
	r.publish(t, 300)
	require.Eventually(t, func() bool { return r.c.count() == 300 }, 20*time.Second, 5*time.Millisecond)

	r.cut(t)
	r.publish(t, 300) // from a node away from NATS
	require.Eventually(t, func() bool { return r.c.count() == 600 }, 20*time.Second, 5*time.Millisecond,
		"the ticks of a publisher away from NATS did not all arrive (%d of 600)", r.c.count())
	assert.Equal(t, 1, r.sub.Publishers())

	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() && hears(r.a, "b") }, 20*time.Second, 10*time.Millisecond, "b not heard again")
	require.Eventually(t, func() bool { return r.logs.Count("publisher's node heard again") > 0 }, 20*time.Second, 10*time.Millisecond)
	r.publish(t, 300)
	require.Eventually(t, func() bool { return r.c.count() == 900 }, 20*time.Second, 5*time.Millisecond)
	assert.Zero(t, r.pub.Stats().Dropped, "the publisher's queue pair to the subscriber failed")
	got := r.closeAndAccount(t)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	assert.Empty(t, r.c.events)
	assert.Zero(t, got.Lost())
}

// The subscriber's hold is the bus's setting too: a publisher whose node
// stays unheard for the whole of its node's bus.Config.UnheardHold is
// gone then, queue pairs up or not: they are closed, the drop is logged
// with its reason, and once the publisher's node is back the publisher
// reconnects and what it wrote meanwhile into nothing is named. (Before,
// the subscriber's hold was a fixed 30 s.)
func TestPubSub_UnheardPublisher_DroppedWhenTheSubscribersHoldEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newPubAwayRig(t, ctx, 300*time.Millisecond)
	r.publish(t, 100)
	require.Eventually(t, func() bool { return r.c.count() == 100 }, 20*time.Second, 5*time.Millisecond)

	r.cut(t)
	require.Eventually(t, func() bool { return r.sub.Publishers() == 0 }, 20*time.Second, 10*time.Millisecond,
		"the subscriber still holds the queue pairs of a publisher unheard for longer than its hold")
	assert.Positive(t, r.logs.Count("unheard for the whole hold"), "the drop was not logged with its reason")

	r.link.Restore()
	require.Eventually(t, func() bool { return r.b.Connected() && hears(r.a, "b") }, 20*time.Second, 10*time.Millisecond, "b not heard again")
	// the publisher's writer finds its queue pair failed when it writes,
	// and reconnects: until then its ticks go nowhere (and are named once
	// a later one arrives)
	for deadline := time.Now().Add(20 * time.Second); r.c.count() == 100; time.Sleep(5 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the publisher did not reconnect (the subscriber has %d publishers)", r.sub.Publishers())
		r.publish(t, 1)
	}
	assert.Equal(t, 1, r.sub.Publishers())
	r.publish(t, 100)
	require.Eventually(t, func() bool { return r.sub.Counters().Next > r.published }, 20*time.Second, 10*time.Millisecond,
		"the subscriber never passed the last tick (at %d of %d)", r.sub.Counters().Next, r.published)
	r.closeAndAccount(t)
}

// A subscriber whose node stays unheard for the whole hold is dropped
// then, even with its queue pair up (its publisher's node's
// bus.Config.UnheardHold bounds the hold:
// a node gone from the control plane for good is not written to forever),
// counted and logged; what it missed is named, as for any dropped ring.
func TestPubSub_UnheardSubscriber_DroppedWhenTheHoldEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newAwayRig(t, ctx, 300*time.Millisecond)
	var logs testlog.Buf
	pub, err := publisher.New(ctx, r.a, r.devA, publisher.Config{Topic: "away", Idle: rdma.Yield{}, Logger: zerolog.New(&logs),
		JournalSlots: -1})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	r.publish(t, pub, 100)
	require.Eventually(t, func() bool { return r.c.count() == 100 || pub.Subscribers() == 0 }, 20*time.Second, 5*time.Millisecond)
	r.link.Cut()
	require.Eventually(t, func() bool { return pub.Subscribers() == 0 }, 20*time.Second, 10*time.Millisecond, "the hold never ended")
	require.Eventually(t, func() bool { return logs.Count("unheard for the whole hold") > 0 }, 20*time.Second, 5*time.Millisecond,
		"the drop was not logged with its reason") // logged just after the target is removed
	assert.Positive(t, pub.UnheardDrops())
	r.publish(t, pub, 100) // to nobody
	require.NoError(t, pub.Close())
	r.link.Restore()
	require.Eventually(t, func() bool { return r.sub.Counters().Next > r.sequence }, 20*time.Second, 10*time.Millisecond,
		"the subscriber never passed the tail (at %d of %d)", r.sub.Counters().Next, r.sequence)
	r.closeAndAccount(t)
}

// The same, named while it runs: once its node is back on NATS the
// subscriber asks the home for its counter, and the reader names the
// tail after the gap timeout, with the publisher alive and silent.
func TestPubSub_DroppedSubscriber_NamesTheTailWhenNATSIsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a node away from NATS past the heartbeat timeout; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := newAwayRig(t, ctx, -1)
	r.dropSubscriber(t, ctx)
	r.link.Restore()
	require.Eventually(t, func() bool { return r.sub.Counters().Next > r.sequence }, 20*time.Second, 10*time.Millisecond,
		"the subscriber never passed the tail (at %d of %d)", r.sub.Counters().Next, r.sequence)
	got := r.sub.Counters()
	assert.Less(t, got.Received, r.sequence, "the dropped subscriber received every tick")
	assert.Equal(t, r.sequence-got.Received, got.Lost(), "lost is published minus delivered")
	assert.Zero(t, got.Tail, "named at Close, not while running")
	r.closeAndAccount(t)
}

// namedThrough is accountedIn for a tail named up to a bound past the
// last sequence published (an ended epoch's reservation): the last event
// may run past to.
func namedThrough(seqs []uint64, events []ring.Event, from, to uint64) error {
	if n := len(events); n > 0 && events[n-1].To > to && events[n-1].From <= to {
		last := events[n-1]
		last.To = to
		events = append(append([]ring.Event(nil), events[:n-1]...), last)
	}
	return accountedIn(seqs, events, from, to)
}

// The tail no counter outlives: a publisher drops a subscriber it cannot
// hear, publishes on to nobody, then closes as its own node is away from
// NATS, so its home cannot write where its epoch ended (nor delete its
// lease), and there is no journal. Once the subscriber is back on NATS, no
// home answers, and the lease has expired (nobody holds it: the epoch is
// over), the subscriber names what it misses below the epoch's
// reservation (the only bound left; the next epoch would start there) as
// the ended epoch's: every sequence published is delivered or named.
// (Before, the subscriber waited at 301 in silence, and closed with lost
// 0.)
func TestPubSub_HomeGoneWithoutItsEnd_TheSubscriberNamesTheEpochsRest(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps two nodes away from NATS past the heartbeat timeout and a lease's expiry; skipped with -short")
	}
	homeGoneWithoutEnd(t, false)
}

// The same, with a gap timeout longer than the test: the reader names
// nothing while it runs, and Close names the epoch's rest.
func TestPubSub_HomeGoneWithoutItsEnd_CloseNamesTheEpochsRest(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps two nodes away from NATS past the heartbeat timeout and a lease's expiry; skipped with -short")
	}
	homeGoneWithoutEnd(t, true)
}

func homeGoneWithoutEnd(t *testing.T, atClose bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// one lease for the bucket (its TTL is the first node's): short, so
	// that the closed home's lease expires within the test
	cfg := func(id string) bus.Config {
		return bus.Config{NodeID: id, LeaseTTL: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: time.Second}
	}
	srv, err := bus.Open(ctx, cfg("s")) // the server, nothing else
	require.NoError(t, err)
	defer srv.Close()
	u, err := url.Parse(srv.ClientURL())
	require.NoError(t, err)
	via := func(id string, l *natsLink) bus.Config {
		c := cfg(id)
		v := *u
		v.Host = l.addr
		c.NATS = bus.NATSConfig{URLs: []string{v.String()}, ReconnectWait: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
		return c
	}
	linkA, linkB := newNATSLink(t, u.Host), newNATSLink(t, u.Host)
	ca := via("a", linkA)
	ca.UnheardHold = -1 // a drops b as soon as it cannot hear it
	a, err := bus.Open(ctx, ca)
	require.NoError(t, err)
	defer a.Close()
	b, err := bus.Open(ctx, via("b", linkB))
	require.NoError(t, err)
	defer b.Close()
	devA, devB := link.NewDevices(link.DevicesConfig{HostID: a.HostID()}), link.NewDevices(link.DevicesConfig{HostID: b.HostID()})
	defer devA.Close()
	defer devB.Close()
	var c collect
	var logs testlog.Buf
	sc := subscriber.Config{Topic: "ended", Idle: rdma.Yield{}, StatsInterval: -1, Logger: zerolog.New(&logs)}
	if atClose {
		sc.GapTimeout = time.Minute
	}
	sub, err := subscriber.New(ctx, b, devB, sc, &c)
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	pub, err := publisher.New(ctx, a, devA, publisher.Config{Topic: "ended", Idle: rdma.Yield{}, JournalSlots: -1})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	var published uint64
	publish := func(n int) {
		var tk tick.Tick
		for i := 0; i < n; i++ {
			feed.Next(&tk, time.Now().UnixNano())
			seq, err := pub.PublishTick(&tk)
			require.NoError(t, err)
			published = seq
		}
	}
	publish(300)
	require.Eventually(t, func() bool { return c.count() == 300 || pub.Subscribers() == 0 }, 20*time.Second, 5*time.Millisecond)
	linkB.Cut()
	require.Eventually(t, func() bool { return pub.Subscribers() == 0 }, 20*time.Second, 10*time.Millisecond, "the publisher kept the subscriber")
	publish(200) // to nobody
	linkA.Cut()
	require.Eventually(t, func() bool { return !a.Connected() }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, pub.Close()) // its home can write nothing: not where its epoch ended, nor its lease's deletion

	linkB.Restore()
	if atClose {
		require.Eventually(t, func() bool { return logs.Count("is gone without telling where its epoch ended") > 0 }, 30*time.Second, 10*time.Millisecond,
			"the subscriber never found the epoch ended")
		assert.LessOrEqual(t, sub.Counters().Next, uint64(301), "named while running, with a gap timeout of a minute")
	} else {
		require.Eventually(t, func() bool { return sub.Counters().Next > published }, 30*time.Second, 10*time.Millisecond,
			"the subscriber never passed the tail (at %d of %d)", sub.Counters().Next, published)
	}
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	got := sub.Counters()
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.NoError(t, namedThrough(c.seqs, c.events, 1, published))
	require.NotEmpty(t, c.events)
	last := c.events[len(c.events)-1]
	assert.Equal(t, ring.EventEpoch, last.Kind, "the rest of the epoch is named the ended epoch's: %v", c.events)
	assert.Positive(t, got.Epoch)
	assert.Less(t, got.Received, published)
	if atClose {
		assert.Positive(t, logs.Count("closed short of an epoch that ended without telling where"))
	}
}
