package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestNode_Discovery_SeparateServerProcess_AnyOrder(t *testing.T) {
	ctx := context.Background()
	_, url := startNatsd(t, freePort(t))

	// a subscriber first, then a publisher, then another subscriber, each on
	// its own node
	var subRec, pubRec recorder
	s1 := openNode(t, testConfig("s1", url))
	_, err := s1.Subscribe(ctx, subSpec("px", "one", &subRec))
	require.NoError(t, err)
	p := openNode(t, testConfig("p", url))
	pub, err := p.Publish(ctx, pubSpec("px", &pubRec))
	require.NoError(t, err)
	s2 := openNode(t, testConfig("s2", url))
	_, err = s2.Subscribe(ctx, subSpec("px", "two", &subRec))
	require.NoError(t, err)

	for _, n := range []*bus.Node{s1, p, s2} {
		n := n
		require.Eventually(t, func() bool { return len(n.Peers()) == 2 }, eventually, tick, "%s sees %v", n.ID(), peerIDs(n))
	}
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 2 }, eventually, tick, "events %v", pubRec.list())
	require.Eventually(t, func() bool { return subRec.count("pub+p/p") == 2 }, eventually, tick, "events %v", subRec.list())
	assert.True(t, strings.HasPrefix(p.ClientURL(), "nats://127.0.0.1:"))
}

func TestNode_PeerKilled_NoticedWithinTimeout_CallbackOnce(t *testing.T) {
	ctx := context.Background()
	_, url := startNatsd(t, freePort(t))
	var downs recorder
	cfg := testConfig("pub", url)
	cfg.OnPeerDown = func(p bus.PeerInfo, err error) {
		downs.add(p.ID + " " + map[bool]string{true: "lost", false: "other"}[isErr(err, bus.ErrPeerLost)])
	}
	n := openNode(t, cfg)
	var rec recorder
	gone := make(chan error, 4)
	spec := pubSpec("kt", &rec)
	spec.OnSubscriberGone = func(s bus.SubscriberInfo, err error) { rec.add("sub-" + s.Key()); gone <- err }
	pub, err := n.Publish(ctx, spec)
	require.NoError(t, err)

	victim := startProc(t, "bus-node", "-url", url, "-id", "victim", "-topic", "kt", "-sub", "s")
	require.Eventually(t, func() bool { return rec.count("sub+victim/s") == 1 }, eventually, tick, "events %v", rec.list())

	victim.kill() // SIGKILL: no goodbye
	select {
	case err := <-gone:
		require.ErrorIs(t, err, bus.ErrPeerLost)
	case <-time.After(hbTimeout + eventually):
		t.Fatalf("subscriber of a killed process not dropped; events %v", rec.list())
	}
	require.Eventually(t, func() bool { return downs.count("victim lost") == 1 }, eventually, tick)
	time.Sleep(3 * hbInterval)
	assert.Equal(t, 1, rec.count("sub-victim/s"))
	assert.Equal(t, 1, downs.count("victim lost"))
	assert.Empty(t, pub.Subscribers())
	assert.Empty(t, n.Peers())
}

func TestHome_HomeProcessKilled_OtherPublisherToldWithinTimeout(t *testing.T) {
	ctx := context.Background()
	_, url := startNatsd(t, freePort(t))
	home := startProc(t, "bus-node", "-url", url, "-id", "home", "-topic", "ht", "-pub")
	n := openNode(t, testConfig("other", url))
	var rec recorder
	lost := make(chan error, 2)
	spec := pubSpec("ht", &rec)
	spec.OnHomeLost = func(h bus.HomeInfo, err error) { rec.add("homelost " + h.Node.ID); lost <- err }
	pub, err := n.Publish(ctx, spec)
	require.NoError(t, err)
	require.Equal(t, "home", pub.Home().Node.ID)
	require.False(t, pub.Home().Local)
	require.Equal(t, []byte("home-of-ht"), pub.Home().Descriptor)

	home.kill() // SIGKILL: no goodbye, no unhome
	select {
	case err := <-lost:
		// the lease expiring (LeaseTTL) or the heartbeat timeout, whichever first
		require.ErrorIs(t, err, bus.ErrHomeLost)
	case <-time.After(hbTimeout + eventually):
		t.Fatal("home process killed, other publisher never told")
	}
	require.ErrorIs(t, pub.HomeErr(), bus.ErrHomeLost)
	time.Sleep(3 * hbInterval)
	assert.Equal(t, 1, rec.count("homelost home"))
}
