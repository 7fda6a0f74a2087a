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

func TestConnect_Errors_AreClear(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	var rec recorder
	ss := subSpec("t", "s", &rec)
	ss.Accept = func(_ context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
		if req.From.ID != "a" || req.Endpoint.QPN != 5 || string(req.Data) != "hello" {
			return bus.ConnectReply{}, errors.New("unexpected request")
		}
		return bus.ConnectReply{}, errors.New("ring is full of QPs")
	}
	_, err := b.Subscribe(ctx, ss)
	require.NoError(t, err)
	ep := sampleEndpoint(rdma.ProviderTCP, "host-a", 5)

	_, err = a.Connect(ctx, "b", bus.ConnectRequest{Topic: "t", Kind: bus.TargetSubscriber, ID: "s", Endpoint: ep, Data: []byte("hello")})
	require.ErrorIs(t, err, bus.ErrConnectRefused)
	assert.Contains(t, err.Error(), "ring is full of QPs")

	_, err = a.Connect(ctx, "b", bus.ConnectRequest{Topic: "t", Kind: bus.TargetSubscriber, ID: "nope", Endpoint: ep})
	require.ErrorIs(t, err, bus.ErrUnknownTarget)
	_, err = a.Connect(ctx, "b", bus.ConnectRequest{Topic: "t", Kind: bus.TargetHome, Endpoint: ep})
	require.ErrorIs(t, err, bus.ErrUnknownTarget)
	_, err = a.Connect(ctx, "b", bus.ConnectRequest{Topic: "t", Kind: bus.TargetPublisher, ID: "b", Endpoint: ep})
	require.ErrorIs(t, err, bus.ErrUnknownTarget)

	start := time.Now()
	_, err = a.Connect(ctx, "ghost", bus.ConnectRequest{Topic: "t", Kind: bus.TargetSubscriber, ID: "s", Endpoint: ep})
	require.ErrorIs(t, err, bus.ErrNoPeer)
	t.Logf("no-responder error after %v", time.Since(start))

	for name, req := range map[string]bus.ConnectRequest{
		"kind":     {Topic: "t", Kind: "other", Endpoint: ep},
		"endpoint": {Topic: "t", Kind: bus.TargetHome},
		"topic":    {Topic: "a..b", Kind: bus.TargetHome, Endpoint: ep},
		"id":       {Topic: "t", Kind: bus.TargetSubscriber, Endpoint: ep},
	} {
		_, err = a.Connect(ctx, "b", req)
		assert.ErrorIs(t, err, bus.ErrInvalidConfig, name)
	}
	_, err = a.Connect(ctx, "b.c", bus.ConnectRequest{Topic: "t", Kind: bus.TargetHome, Endpoint: ep})
	require.ErrorIs(t, err, bus.ErrInvalidConfig)
	st := a.Stats()
	assert.GreaterOrEqual(t, st.ConnectsFailed, uint64(5))
	assert.GreaterOrEqual(t, b.Stats().ConnectsRefused, uint64(4))
}

func TestNode_Restarted_SameID_OldAnnouncementsGone(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	var rec recorder
	spec := pubSpec("t", &rec)
	reasons := make(chan error, 4)
	spec.OnSubscriberGone = func(s bus.SubscriberInfo, err error) { rec.add("sub-" + s.Key()); reasons <- err }
	pub, err := a.Publish(ctx, spec)
	require.NoError(t, err)

	cb := testConfig("b", a.ClientURL())
	cb.HeartbeatTimeout = time.Minute
	b1, err := bus.Open(ctx, cb)
	require.NoError(t, err)
	_, err = b1.Subscribe(ctx, subSpec("t", "s", &recorder{}))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.count("sub+b/s") == 1 }, eventually, tick)
	// a new incarnation under the same id (the old process still runs, as
	// one that hangs would): the old one's announcements go at once
	b2 := openNode(t, cb)
	_, err = b2.Subscribe(ctx, subSpec("t", "s", &recorder{}))
	require.NoError(t, err)
	select {
	case err := <-reasons:
		require.ErrorIs(t, err, bus.ErrPeerRestarted)
	case <-time.After(eventually):
		t.Fatalf("old incarnation's subscriber not dropped: %v", rec.list())
	}
	require.Eventually(t, func() bool { return rec.count("sub+b/s") == 2 }, eventually, tick)
	require.Len(t, pub.Subscribers(), 1)
	assert.Equal(t, b2.Info().Incarnation, pub.Subscribers()[0].Node.Incarnation)

	// the stale incarnation's heartbeats and goodbye change nothing
	time.Sleep(3 * hbInterval)
	require.NoError(t, b1.Close())
	time.Sleep(3 * hbInterval)
	require.Len(t, pub.Subscribers(), 1)
	assert.Equal(t, b2.Info().Incarnation, pub.Subscribers()[0].Node.Incarnation)
	assert.Equal(t, []string{"b"}, peerIDs(a))
	assert.Equal(t, 1, rec.count("sub-b/s"))
}

func TestNode_Specs_Invalid_RejectedWithoutEffect(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	var rec recorder
	for name, mut := range map[string]func(*bus.SubscribeSpec){
		"topic":  func(s *bus.SubscribeSpec) { s.Topic = "a..b" },
		"empty":  func(s *bus.SubscribeSpec) { s.Topic = "" },
		"id":     func(s *bus.SubscribeSpec) { s.ID = "x y" },
		"mode":   func(s *bus.SubscribeSpec) { s.Mode = "fast" },
		"accept": func(s *bus.SubscribeSpec) { s.Accept = nil },
		"ring":   func(s *bus.SubscribeSpec) { s.Ring = make([]byte, 100_000) },
	} {
		s := subSpec("t", "s", &rec)
		mut(&s)
		_, err := a.Subscribe(ctx, s)
		assert.ErrorIs(t, err, bus.ErrInvalidConfig, name)
	}
	for name, mut := range map[string]func(*bus.PublishSpec){
		"topic":      func(s *bus.PublishSpec) { s.Topic = "*" },
		"id":         func(s *bus.PublishSpec) { s.ID = ">" },
		"acceptHome": func(s *bus.PublishSpec) { s.AcceptHome = nil },
		"data":       func(s *bus.PublishSpec) { s.Data = make([]byte, 100_000) },
	} {
		s := pubSpec("t", &rec)
		mut(&s)
		_, err := a.Publish(ctx, s)
		assert.ErrorIs(t, err, bus.ErrInvalidConfig, name)
	}
	assert.Zero(t, a.Stats().Subscriptions)
	assert.Zero(t, a.Stats().Publications)
	assert.Empty(t, a.Stats().Homes)

	_, err := a.Subscribe(ctx, subSpec("t", "s", &rec))
	require.NoError(t, err)
	_, err = a.Subscribe(ctx, subSpec("t", "s", &rec))
	require.ErrorIs(t, err, bus.ErrDuplicate)
	_, err = a.Publish(ctx, pubSpec("t", &rec))
	require.NoError(t, err)
	_, err = a.Publish(ctx, pubSpec("t", &rec))
	require.ErrorIs(t, err, bus.ErrDuplicate)
	// publisher and subscriber on one node find each other
	require.Eventually(t, func() bool { return rec.count("sub+a/s") == 1 && rec.count("pub+a/a") == 1 }, eventually, tick, "%v", rec.list())
}

func TestConfig_Invalid_NamesKeyAndValue(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  bus.Config
		want string
	}{
		"node id":      {bus.Config{NodeID: "a.b"}, `NodeID "a.b"`},
		"prefix":       {bus.Config{Prefix: "x..y"}, `Prefix`},
		"provider":     {bus.Config{Provider: "udp"}, `Provider "udp"`},
		"providers":    {bus.Config{Providers: []string{"shm", "ib"}}, `Providers entry "ib"`},
		"heartbeat":    {bus.Config{HeartbeatInterval: time.Second, HeartbeatTimeout: time.Second}, "HeartbeatTimeout 1s"},
		"interval":     {bus.Config{HeartbeatInterval: time.Microsecond}, "HeartbeatInterval"},
		"homes":        {bus.Config{Homes: map[string]string{"t": "a b"}}, `Homes[t]`},
		"listen":       {bus.Config{NATS: bus.NATSConfig{EmbeddedListen: "nope"}}, "NATS.EmbeddedListen"},
		"cert pair":    {bus.Config{NATS: bus.NATSConfig{URLs: []string{"nats://x:1"}, CertFile: "c.pem"}}, "NATS.CertFile"},
		"token+user":   {bus.Config{NATS: bus.NATSConfig{URLs: []string{"nats://x:1"}, Token: "t", User: "u"}}, "NATS.Token"},
		"reconnect":    {bus.Config{NATS: bus.NATSConfig{ReconnectWait: time.Second, ReconnectMax: time.Millisecond}}, "NATS.ReconnectWait"},
		"request":      {bus.Config{RequestTimeout: -1}, "RequestTimeout"},
		"nkey missing": {bus.Config{NATS: bus.NATSConfig{URLs: []string{"nats://127.0.0.1:1"}, NKeySeedFile: "/nonexistent/seed"}}, "NKeySeedFile"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n, err := bus.Open(ctx, c.cfg)
			if n != nil {
				_ = n.Close()
			}
			require.ErrorIs(t, err, bus.ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestNode_Open_UnreachableServer_FailsWithErrConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := testConfig("x", "nats://127.0.0.1:"+itoa(freePort(t)))
	_, err := bus.Open(ctx, cfg)
	require.ErrorIs(t, err, bus.ErrConnect)
}
