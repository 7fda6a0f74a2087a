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
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
)

// lastStats keeps the last stats message a subscriber handed to OnStats.
type lastStats struct {
	mu sync.Mutex
	m  *stats.Message
}

func (l *lastStats) set(m *stats.Message) { l.mu.Lock(); l.m = m; l.mu.Unlock() }

func (l *lastStats) provider() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		return ""
	}
	return l.m.Provider
}

// gapTimeout for the mixed-provider tests: a tcp write can trail a later
// shm write by far more than the 100 ms default on the loaded test machine,
// (seconds under CI's load: every package at once on two cores), and
// these tests are about order and providers, not gap detection.
const gapTimeout = 3 * time.Second

// pubTimeout for their publishers, for the same reason: under -race on the
// loaded machine a tcp completion can take longer than the 1 s default
// (ring.ErrTimeout, "timed out waiting for a completion"), and no test here
// is about a publish's timeout.
const pubTimeout = 10 * time.Second

// Two hosts in one process (nodes with distinct host ids): each publisher
// writes over shm to the subscriber on its host and over tcp to the other;
// the second publisher claims on the first's home over tcp. Both rings are
// on shm and registered on tcp too; both see every tick in one order.
func TestProviders_ShmAndTCPInOneTopic_OneOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // four nodes and a home to find under -race on a loaded host
	defer cancel()
	open := func(id, host, url string) (*bus.Node, *link.Devices) {
		// a long lease: on a starved test machine a 1 s lease may rightly be
		// lost (and the home fail over), which is not what this test is about
		n, err := bus.Open(ctx, bus.Config{NodeID: id, HostID: host, NATS: bus.NATSConfig{URLs: nilIfEmpty(url)}, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		d := link.NewDevices(link.DevicesConfig{HostID: host})
		t.Cleanup(func() { _ = d.Close() })
		return n, d
	}
	pa, dpa := open("pa", "hostA", "")
	url := pa.ClientURL()
	sa, dsa := open("sa", "hostA", url)
	pb, dpb := open("pb", "hostB", url)
	sb, dsb := open("sb", "hostB", url)

	var ca, cb collect
	var la, lb lastStats
	subA, err := subscriber.New(ctx, sa, dsa, subscriber.Config{Topic: "mix", Idle: rdma.Yield{}, GapTimeout: gapTimeout, StatsInterval: 20 * time.Millisecond, OnStats: la.set}, &ca)
	require.NoError(t, err)
	subB, err := subscriber.New(ctx, sb, dsb, subscriber.Config{Topic: "mix", Idle: rdma.Yield{}, GapTimeout: gapTimeout, StatsInterval: 20 * time.Millisecond, OnStats: lb.set}, &cb)
	require.NoError(t, err)
	// A failed require below must not leave the subscribers' stats loops
	// reading rings the devices' cleanup unmaps (a crash hides the failure).
	t.Cleanup(func() { _ = subA.Close(); _ = subB.Close() })
	errs := make(chan error, 2)
	go func() { errs <- subA.Run(ctx) }()
	go func() { errs <- subB.Run(ctx) }()

	pubA, err := publisher.New(ctx, pa, dpa, publisher.Config{Topic: "mix", Idle: rdma.Yield{}, Timeout: pubTimeout})
	require.NoError(t, err)
	defer pubA.Close()
	require.True(t, pubA.IsHome())
	pubB, err := publisher.New(ctx, pb, dpb, publisher.Config{Topic: "mix", Idle: rdma.Yield{}, Timeout: pubTimeout})
	require.NoError(t, err)
	defer pubB.Close()
	require.False(t, pubB.IsHome())
	require.NoError(t, pubA.WaitSubscribers(ctx, 2))
	require.NoError(t, pubB.WaitSubscribers(ctx, 2))

	const n = 1000
	for i := 0; i < n; i++ {
		p := pubA
		if i%2 == 1 {
			p = pubB
		}
		_, err := p.Publish(1, []byte("tick"), time.Now().UnixNano())
		require.NoError(t, err, "tick %d", i)
	}
	if !assert.Eventually(t, func() bool { return ca.count() == n && cb.count() == n }, 20*time.Second, 5*time.Millisecond) {
		t.Fatalf("not every tick received: A %d of %d %+v, B %d %+v", ca.count(), n, subA.Counters(), cb.count(), subB.Counters())
	}
	assert.Equal(t, "shm+tcp", subA.Providers())
	assert.Equal(t, "shm+tcp", subB.Providers())
	require.Eventually(t, func() bool { return la.provider() == "shm+tcp" && lb.provider() == "shm+tcp" }, 5*time.Second, 5*time.Millisecond,
		"the stats message names both providers")

	require.NoError(t, subA.Close())
	require.NoError(t, subB.Close())
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	assert.Equal(t, "shm+tcp", subA.ProvidersUsed())
	ca.mu.Lock()
	cb.mu.Lock()
	defer ca.mu.Unlock()
	defer cb.mu.Unlock()
	require.Len(t, ca.seqs, n)
	for i, s := range ca.seqs {
		require.Equal(t, uint64(i+1), s)
	}
	assert.Equal(t, ca.seqs, cb.seqs)
	assert.Empty(t, ca.events)
	assert.Empty(t, cb.events)
}

func nilIfEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// A connect over a provider this process cannot open (verbs in a build
// without it) is refused with a message naming it, to the subscriber and
// to the home alike; both go on serving the providers they have.
func TestProviders_ConnectOverUnavailableProvider_RefusedClearly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "refuse", HostID: "hostA", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: "hostA"})
	defer devs.Close()
	var c collect
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "rf", Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	defer sub.Close()
	go func() { _ = sub.Run(ctx) }()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "rf", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	ep := rdma.Endpoint{Provider: rdma.ProviderVerbs, HostID: "hostA", QPN: 7, Nonce: 1, MTU: 4096}
	for _, kind := range []bus.TargetKind{bus.TargetSubscriber, bus.TargetHome} {
		_, err := node.Connect(ctx, node.ID(), bus.ConnectRequest{Topic: "rf", Kind: kind, ID: sub.ID(), Endpoint: ep})
		require.ErrorIs(t, err, bus.ErrConnectRefused, kind)
		assert.Contains(t, err.Error(), "verbs", kind)
	}
	assert.Equal(t, "shm", sub.Providers(), "the refused connect added nothing")
	_, err = pub.Publish(1, []byte("x"), time.Now().UnixNano())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.count() == 1 }, 5*time.Second, 5*time.Millisecond)
}

// The other way round: a ring and a home allocated on tcp are registered
// on shm for publishers on their host. The home's own publisher claims
// through its tcp loopback, the other through shm, on one counter.
func TestProviders_TCPAllocatedRingAndHome_ServeShmPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// the long lease of the test above, for the same reason
	a, err := bus.Open(ctx, bus.Config{NodeID: "ta", HostID: "hostA", LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	require.NoError(t, err)
	defer a.Close()
	open := func(id string) (*bus.Node, *link.Devices) {
		n, err := bus.Open(ctx, bus.Config{NodeID: id, HostID: "hostA", NATS: bus.NATSConfig{URLs: []string{a.ClientURL()}}, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		d := link.NewDevices(link.DevicesConfig{HostID: "hostA"})
		t.Cleanup(func() { _ = d.Close() })
		return n, d
	}
	da := link.NewDevices(link.DevicesConfig{HostID: "hostA"})
	defer da.Close()
	b, db := open("tb")
	c, dc := open("tc")

	var got collect
	sub, err := subscriber.New(ctx, b, db, subscriber.Config{Topic: "tr", Provider: rdma.ProviderTCP, Idle: rdma.Yield{}, GapTimeout: gapTimeout, StatsInterval: -1}, &got)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() }) // a failed require: stop polling before db's cleanup unmaps the ring
	errc := make(chan error, 1)
	go func() { errc <- sub.Run(ctx) }()
	home, err := publisher.New(ctx, a, da, publisher.Config{Topic: "tr", Provider: rdma.ProviderTCP, Idle: rdma.Yield{}, Timeout: pubTimeout})
	require.NoError(t, err)
	defer home.Close()
	require.True(t, home.IsHome())
	other, err := publisher.New(ctx, c, dc, publisher.Config{Topic: "tr", Idle: rdma.Yield{}, Timeout: pubTimeout})
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, home.WaitSubscribers(ctx, 1))
	require.NoError(t, other.WaitSubscribers(ctx, 1))

	const n = 600
	for i := 0; i < n; i++ {
		p := home
		if i%3 == 0 {
			p = other
		}
		_, err := p.Publish(1, []byte("t"), time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return got.count() == n }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, "shm", sub.Providers(), "both publishers share the host: shm into the tcp-allocated ring")
	require.NoError(t, sub.Close())
	require.NoError(t, <-errc)
	got.mu.Lock()
	defer got.mu.Unlock()
	for i, s := range got.seqs {
		require.Equal(t, uint64(i+1), s, "one counter, no sequence twice or skipped")
	}
	assert.Empty(t, got.events)
}
