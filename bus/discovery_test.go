package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
)

func TestNode_Discovery_EmbeddedServer_NodesFindEachOther(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	c := openNode(t, testConfig("c", a.ClientURL()))
	for _, n := range []*bus.Node{a, b, c} {
		n := n
		require.Eventually(t, func() bool { return len(n.Peers()) == 2 }, eventually, tick, "node %s sees %v", n.ID(), peerIDs(n))
	}
	assert.Equal(t, []string{"b", "c"}, peerIDs(a))
	assert.Equal(t, "host-b", a.Peers()[0].HostID)
}

func TestPublication_FindsSubscribers_JoinedBeforeAndAfter(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	c := openNode(t, testConfig("c", a.ClientURL()))

	var subRec, pubRec recorder
	early, err := b.Subscribe(ctx, subSpec("T", "early", &subRec))
	require.NoError(t, err)
	pub, err := a.Publish(ctx, pubSpec("T", &pubRec))
	require.NoError(t, err)
	assert.True(t, pub.Home().Local)
	assert.True(t, pub.IsHome())
	late, err := c.Subscribe(ctx, subSpec("T", "late", &subRec))
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		return pubRec.count("sub+b/early") == 1 && pubRec.count("sub+c/late") == 1
	}, eventually, tick, "events: %v", pubRec.list())
	require.Eventually(t, func() bool { return subRec.count("pub+a/a") == 2 }, eventually, tick, "events: %v", subRec.list())
	subs := pub.Subscribers()
	require.Len(t, subs, 2)
	assert.Equal(t, bus.ModeLossy, subs[0].Mode)
	assert.Equal(t, []byte("ring-early"), subs[0].Ring)
	assert.Equal(t, "host-b", subs[0].Node.HostID)

	// every node's directory has the topic, its publisher and both subscribers
	require.Eventually(t, func() bool {
		ts := c.Topics()
		return len(ts) == 1 && len(ts[0].Subscribers) == 2 && len(ts[0].Publishers) == 1
	}, eventually, tick)
	ts := c.Topics()
	assert.Equal(t, "T", ts[0].Topic)
	assert.Equal(t, "b/early", ts[0].Subscribers[0].Key())
	assert.Equal(t, "c/late", ts[0].Subscribers[1].Key())
	assert.Equal(t, "a/a", ts[0].Publishers[0].Key())

	// queue-pair exchange with the late subscriber
	rep, err := a.Connect(ctx, "c", bus.ConnectRequest{Topic: "T", Kind: bus.TargetSubscriber, ID: "late",
		Endpoint: sampleEndpoint(rdma.ProviderTCP, "host-a", 9)})
	require.NoError(t, err)
	assert.Equal(t, []byte("ring-region-late"), rep.Region)
	assert.Equal(t, uint32(2), rep.Endpoint.QPN)

	// a subscriber that leaves is reported once
	require.NoError(t, early.Close())
	require.NoError(t, early.Close())
	require.Eventually(t, func() bool { return pubRec.count("sub-b/early") == 1 }, eventually, tick)
	require.NoError(t, late.Close())
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 0 }, eventually, tick)
	require.Eventually(t, func() bool { return pubRec.count("sub-c/late") == 1 }, eventually, tick) // callback follows the view
}

func TestPublication_SecondPublisher_FindsHomeAndConnects(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	var ra, rb recorder
	pa, err := a.Publish(ctx, pubSpec("T", &ra))
	require.NoError(t, err)
	pb, err := b.Publish(ctx, pubSpec("T", &rb))
	require.NoError(t, err)
	h := pb.Home()
	assert.False(t, h.Local)
	assert.Equal(t, "a", h.Node.ID)
	assert.Equal(t, []byte("home-of-T"), h.Descriptor)
	assert.False(t, pb.IsHome())

	rep, err := b.Connect(ctx, h.Node.ID, bus.ConnectRequest{Topic: "T", Kind: bus.TargetHome,
		Endpoint: sampleEndpoint(rdma.ProviderTCP, "host-b", 3)})
	require.NoError(t, err)
	assert.Equal(t, []byte("seq-region"), rep.Region)

	// the home goes: the other publisher gets a clear error, once
	require.NoError(t, pa.Close())
	require.Eventually(t, func() bool { return rb.count("homelost a") == 1 }, eventually, tick)
	require.ErrorIs(t, pb.HomeErr(), bus.ErrHomeLost)
	_, err = b.Connect(ctx, "a", bus.ConnectRequest{Topic: "T", Kind: bus.TargetHome,
		Endpoint: sampleEndpoint(rdma.ProviderTCP, "host-b", 3)})
	require.ErrorIs(t, err, bus.ErrUnknownTarget)
	time.Sleep(3 * hbInterval)
	assert.Equal(t, 1, rb.count("homelost a"))
}

func TestSubscription_PublishersView_ValidatorAndGone(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	c := openNode(t, testConfig("c", a.ClientURL()))
	var rec recorder
	ss := subSpec("t", "s", &rec)
	ss.ValidatePublisher = func(p bus.PublisherInfo) error {
		if len(p.Data) != 4 {
			return errors.New("want a 4-byte publisher id")
		}
		return nil
	}
	sub, err := a.Subscribe(ctx, ss)
	require.NoError(t, err)
	assert.Equal(t, "t", sub.Topic())
	assert.Equal(t, "s", sub.ID())

	good := pubSpec("t", &recorder{})
	good.Data = []byte{1, 0, 0, 0}
	pb, err := b.Publish(ctx, good)
	require.NoError(t, err)
	assert.Equal(t, "t", pb.Topic())
	assert.Equal(t, "b", pb.ID())
	bad := pubSpec("t", &recorder{})
	bad.Data = []byte("nope!")
	_, err = c.Publish(ctx, bad)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return a.Stats().Ignored["pub"] >= 1 }, eventually, tick)
	require.Eventually(t, func() bool { return len(sub.Publishers()) == 1 }, eventually, tick)
	assert.Equal(t, "b/b", sub.Publishers()[0].Key())
	assert.Equal(t, []byte{1, 0, 0, 0}, sub.Publishers()[0].Data)
	assert.Zero(t, rec.count("pub+c/c"))

	require.NoError(t, pb.Close())
	require.NoError(t, pb.Close())
	require.Eventually(t, func() bool { return rec.count("pub-b/b") == 1 }, eventually, tick)
	assert.Empty(t, sub.Publishers())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 }, eventually, tick) // c's goodbye is handled
	time.Sleep(3 * hbInterval)                                                          // and any callback it caused has run
	assert.Zero(t, rec.count("pub-c/c"), "a rejected publisher is never reported, not even gone")
}
