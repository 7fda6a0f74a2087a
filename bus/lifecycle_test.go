package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestNode_Close_SaysGoodbye_PeersDropAtOnce(t *testing.T) {
	ctx := context.Background()
	slow := func(id, url string) bus.Config {
		c := testConfig(id, url)
		c.HeartbeatTimeout = time.Minute // only a goodbye can drop a peer within the test
		return c
	}
	var downs recorder
	ca := slow("a", "")
	ca.OnPeerDown = func(p bus.PeerInfo, err error) {
		if isErr(err, bus.ErrPeerLeft) {
			downs.add("left " + p.ID)
		}
	}
	a := openNode(t, ca)
	b := openNode(t, slow("b", a.ClientURL()))
	var rec recorder
	pub, err := a.Publish(ctx, pubSpec("g", &rec))
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, subSpec("g", "s", &rec))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 }, eventually, tick)

	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")
	require.Eventually(t, func() bool { return len(a.Peers()) == 0 }, eventually, tick)
	require.Eventually(t, func() bool { return downs.count("left b") == 1 }, eventually, tick)
	require.Eventually(t, func() bool { return rec.count("sub-b/s") == 1 }, eventually, tick) // its own goroutine
	assert.Empty(t, pub.Subscribers())

	_, err = b.Subscribe(ctx, subSpec("g", "again", &rec))
	require.ErrorIs(t, err, bus.ErrClosed)
	_, err = b.Publish(ctx, pubSpec("g", &rec))
	require.ErrorIs(t, err, bus.ErrClosed)
	require.ErrorIs(t, b.PublishStats("g", "s", []byte("x")), bus.ErrClosed)
}

// A heartbeat racing Close (sent after the goodbye, as a heartbeat loop
// that had just woken sends it) does not bring the node back among its
// peers: the goodbye is its last word. Without that, the peer came back
// until its heartbeat timeout (seen once in CI's race run of the test
// above).
func TestNode_Close_HeartbeatAfterGoodbye_PeerStaysGone(t *testing.T) {
	slow := func(id, url string) bus.Config {
		c := testConfig(id, url)
		c.HeartbeatTimeout = time.Minute // only a goodbye can drop a peer within the test
		return c
	}
	a := openNode(t, slow("a", ""))
	b := openNode(t, slow("b", a.ClientURL()))
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 }, eventually, tick)
	bus.HeartbeatAfterGoodbye(b)
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return len(a.Peers()) == 0 }, eventually, tick, "a still counts b: %v", a.Peers())
	assert.Never(t, func() bool { return len(a.Peers()) != 0 }, 500*time.Millisecond, tick, "b came back after its goodbye")
}

func TestNode_ServerRestart_ReconnectsReannouncesAndFindsNewNode(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a nats-server process and waits out reconnect backoff; skipped in -short")
	}
	ctx := context.Background()
	port := freePort(t)
	srv, url := startNatsd(t, port)
	fast := func(id string) bus.Config {
		c := testConfig(id, url)
		c.NATS.ReconnectWait = 20 * time.Millisecond
		c.NATS.ReconnectMax = 200 * time.Millisecond
		return c
	}
	a := openNode(t, fast("a"))
	b := openNode(t, fast("b"))
	var rec, aRec recorder
	_, err := b.Subscribe(ctx, subSpec("r", "s", &rec))
	require.NoError(t, err)
	aPub, err := a.Publish(ctx, pubSpec("r", &aRec))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 && len(b.Peers()) == 1 }, eventually, tick)
	require.Eventually(t, func() bool { return len(aPub.Subscribers()) == 1 }, eventually, tick)

	srv.kill()
	require.Eventually(t, func() bool { return !a.Connected() && !b.Connected() }, eventually, tick)
	time.Sleep(2 * hbTimeout) // longer than the heartbeat timeout: ageing must pause while NATS is away
	assert.Equal(t, []string{"b"}, peerIDs(a), "a peer must not age out while NATS is down")
	assert.Len(t, aPub.Subscribers(), 1, "the data plane keeps its subscribers while NATS is away")
	assert.Zero(t, aRec.count("sub-b/s"))
	// a home that cannot renew its lease gives the home up before the lease
	// can expire (the data plane of its subscribers is untouched)
	// (at three quarters of the lease, which may be after the sleep above)
	assert.Eventually(t, func() bool { return errors.Is(aPub.HomeErr(), bus.ErrHomeLost) }, eventually, tick,
		"home error: %v", aPub.HomeErr())

	startNatsd(t, port)
	require.Eventually(t, func() bool { return a.Connected() && b.Connected() }, eventually, tick)
	assert.GreaterOrEqual(t, a.Stats().Reconnects, uint64(1))

	c := openNode(t, fast("c"))
	var pubRec recorder
	pub, err := c.Publish(ctx, pubSpec("r", &pubRec))
	require.NoError(t, err)
	// the restarted server lost its JetStream state: a new home is elected
	assert.Equal(t, "c", pub.Home().Node.ID, "c took the free lease")
	require.Eventually(t, func() bool { return len(a.Peers()) == 2 && len(b.Peers()) == 2 }, eventually, tick,
		"a sees %v, b sees %v", peerIDs(a), peerIDs(b))
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 }, eventually, tick)
	require.Eventually(t, func() bool { return rec.count("pub+c/c") == 1 }, eventually, tick)
	assert.Zero(t, aRec.count("sub-b/s"), "nobody was dropped across the restart")
}

func TestNode_ServerDown_PublishClaimsNoHome_CloseReturnsPromptly(t *testing.T) {
	srv, url := startNatsd(t, freePort(t))
	cfg := testConfig("a", url)
	cfg.RequestTimeout = 500 * time.Millisecond
	a := openNode(t, cfg)
	_, err := a.Subscribe(context.Background(), subSpec("t", "s", &recorder{}))
	require.NoError(t, err)
	srv.kill()
	require.Eventually(t, func() bool { return !a.Connected() }, eventually, tick)

	// nobody can answer and nobody can hear a claim: no home is made
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err = a.Publish(ctx, pubSpec("t", &recorder{}))
	require.ErrorIs(t, err, bus.ErrNoHome)
	assert.Empty(t, a.Stats().Homes)

	done := make(chan error, 1)
	go func() { done <- a.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err, "a goodbye that cannot be sent is not an error of Close")
	case <-time.After(eventually):
		t.Fatal("Close hung while NATS was down")
	}
	require.NoError(t, a.Close())
}

func TestNode_PeerAgedOutWhileAlive_ReannouncesWhenHeardAgain(t *testing.T) {
	ctx := context.Background()
	ca := testConfig("a", "")
	ca.HeartbeatInterval, ca.HeartbeatTimeout = 20*time.Millisecond, 100*time.Millisecond
	a := openNode(t, ca)
	cb := testConfig("b", a.ClientURL())
	cb.HeartbeatInterval, cb.HeartbeatTimeout = 400*time.Millisecond, 2*time.Second // slower than a's timeout
	b := openNode(t, cb)
	var rec recorder
	pub, err := a.Publish(ctx, pubSpec("t", &rec))
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, subSpec("t", "s", &rec))
	require.NoError(t, err)
	// a drops b between b's heartbeats, and relearns its subscriber after each
	require.Eventually(t, func() bool { return rec.count("sub-b/s") >= 2 && rec.count("sub+b/s") >= 3 }, eventually, tick, "%v", rec.list())
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 }, eventually, tick)
}

func TestNode_WaitForServer_OpenSucceedsWhenServerComesLater(t *testing.T) {
	port := freePort(t)
	cfg := testConfig("early", "nats://127.0.0.1:"+itoa(port))
	cfg.NATS.WaitForServer = true
	cfg.NATS.ReconnectWait = 20 * time.Millisecond
	cfg.NATS.ReconnectMax = 100 * time.Millisecond
	type res struct {
		n   *bus.Node
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventually)
		defer cancel()
		n, err := bus.Open(ctx, cfg)
		done <- res{n, err}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Open returned before any server ran: %v", r.err)
	default:
	}
	startNatsd(t, port)
	r := <-done
	require.NoError(t, r.err)
	t.Cleanup(func() { _ = r.n.Close() })
	assert.True(t, r.n.Connected())

	// and gives up, clearly, when its context ends first
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg2 := cfg
	cfg2.NodeID = "never"
	cfg2.NATS.URLs = []string{"nats://127.0.0.1:" + itoa(freePort(t))}
	_, err := bus.Open(ctx, cfg2)
	require.ErrorIs(t, err, bus.ErrConnect)
}

func TestNode_Close_ConcurrentCallers_AllReturnTheSameResult(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	_, err := a.Subscribe(context.Background(), subSpec("t", "s", &recorder{}))
	require.NoError(t, err)
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- a.Close() }()
	}
	for range 4 {
		assert.NoError(t, <-errs)
	}
	assert.False(t, a.Connected())
	assert.Zero(t, a.Stats().Subscriptions)
}
