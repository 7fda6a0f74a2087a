package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestNode_Cluster_NodesOnDifferentServersMeet_AndSurviveLossOfOne(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a two-server NATS cluster and waits for a failover; skipped in -short")
	}
	ctx := context.Background()
	r1, r2 := freePort(t), freePort(t)
	s1, url1 := startNatsd(t, freePort(t), "-cluster", itoa(r1), "-routes", "nats://127.0.0.1:"+itoa(r2))
	s2, url2 := startNatsd(t, freePort(t), "-cluster", itoa(r2), "-routes", "nats://127.0.0.1:"+itoa(r1))

	cfg := func(id string, urls ...string) bus.Config {
		c := testConfig(id, "")
		c.NATS.URLs = urls
		c.NATS.ReconnectWait = 20 * time.Millisecond
		c.NATS.ReconnectMax = 200 * time.Millisecond
		return c
	}
	a := openNode(t, cfg("a", url1, url2)) // lists both: fails over
	victim, survivor := s1, url2
	if a.ClientURL() == url2 {
		victim, survivor = s2, url1
	}
	b := openNode(t, cfg("b", survivor)) // on the other server than a
	var rec recorder
	pub, err := a.Publish(ctx, pubSpec("c", &rec))
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, subSpec("c", "s", &rec))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 }, eventually, tick, "routes up and discovery across servers")

	// kill the server a is on; a fails over to the other
	victim.kill()
	require.Eventually(t, func() bool { return a.Connected() && a.ClientURL() == survivor }, eventually, tick)
	require.Eventually(t, func() bool { return a.Stats().Reconnects >= 1 }, eventually, tick)
	// a newcomer on the surviving server finds both, and b still sees a
	c := openNode(t, cfg("c", survivor))
	require.Eventually(t, func() bool { return len(c.Peers()) == 2 }, eventually, tick, "c sees %v", peerIDs(c))
	require.Eventually(t, func() bool { return b.Connected() && len(b.Peers()) == 2 }, eventually, tick, "b sees %v", peerIDs(b))
	require.Len(t, pub.Subscribers(), 1)
}
