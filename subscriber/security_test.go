package subscriber_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
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

func userKey(t *testing.T) (nkeys.KeyPair, string) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	return kp, pub
}

// sniffer keeps the first message of each kind it sees, as an outsider
// with NATS access would.
type sniffer struct {
	mu   sync.Mutex
	msgs map[string]*nats.Msg // kind → raw message
}

func (s *sniffer) on(m *nats.Msg) {
	var env struct{ Msg []byte }
	var inner struct{ Kind string }
	if json.Unmarshal(m.Data, &env) != nil || json.Unmarshal(env.Msg, &inner) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.msgs[inner.Kind] == nil {
		s.msgs[inner.Kind] = m
	}
}

func (s *sniffer) get(kind string) *nats.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs[kind]
}

// inner decodes the message inside a sniffed envelope.
func inner(t *testing.T, m *nats.Msg, v any) {
	var env struct{ Msg []byte }
	require.NoError(t, json.Unmarshal(m.Data, &env))
	require.NoError(t, json.Unmarshal(env.Msg, v))
}

// The attack of issue 10, replayed by an outsider without the topic's
// rights: sniff the announcement, send connect requests (unsigned, signed
// by an identity allowed only to subscribe, signed under the real
// publisher's node id, a replay of the real publisher's request), then
// reach the ring's queue pair and region with the sniffed endpoint and
// rkey. Every step is refused; only the real publisher's ticks arrive.
func TestSecurity_ForgedPublisher_RefusedAtEveryStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kPub, pPub := userKey(t)
	kSub, pSub := userKey(t)
	kEvil, pEvil := userKey(t)
	// evil holds valid credentials: NATS lets it in and it may subscribe
	auth := bus.Authorization{
		Publish:   map[string][]string{"t": {pPub}},
		Subscribe: map[string][]string{"t": {pSub, pEvil}},
	}
	open := func(id, host, url string, kp nkeys.KeyPair) (*bus.Node, *link.Devices) {
		n, err := bus.Open(ctx, bus.Config{NodeID: id, HostID: host, Key: kp, Authorization: auth, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat,
			NATS: bus.NATSConfig{URLs: nilIfEmpty(url)}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		d := link.NewDevices(link.DevicesConfig{HostID: host})
		t.Cleanup(func() { _ = d.Close() })
		return n, d
	}
	sn, sd := open("sec-sub", "hostS", "", kSub)
	url := sn.ClientURL()

	// step 0: no credentials at all: the embedded server refuses
	_, err := nats.Connect(sn.ServerURL(), nats.MaxReconnects(0), nats.Timeout(5*time.Second))
	require.Error(t, err, "anonymous client accepted by the embedded server")
	assert.ErrorIs(t, err, nats.ErrAuthorization)

	// the outsider with credentials sniffs everything it can
	raw, err := nats.Connect(url)
	require.NoError(t, err)
	defer raw.Close()
	var sn1 sniffer
	sn1.msgs = map[string]*nats.Msg{}
	for _, subj := range []string{"tickbus.d.>", "tickbus.qp.>", "_INBOX.>"} {
		_, err := raw.Subscribe(subj, sn1.on)
		require.NoError(t, err)
	}
	require.NoError(t, raw.Flush())

	var c collect
	sub, err := subscriber.New(ctx, sn, sd, subscriber.Config{Topic: "t", ID: "s", Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()

	pn, pd := open("sec-pub", "hostP", url, kPub)
	pub, err := publisher.New(ctx, pn, pd, publisher.Config{Topic: "t", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	const n = 10
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	var tk tick.Tick
	for i := range n {
		feed.Next(&tk, time.Now().UnixNano())
		tk.Price, tk.PubTime = int64(100+i), time.Now().UnixNano()
		_, err := pub.PublishTick(&tk)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return c.count() == n }, 10*time.Second, 5*time.Millisecond)

	// step 1: the sniffed announcement names the ring (and its rkey)
	require.Eventually(t, func() bool { return sn1.get("sub") != nil && sn1.get("conn") != nil && sn1.get("acc") != nil },
		10*time.Second, 5*time.Millisecond, "nothing sniffed")
	var ann struct{ Desc []byte }
	inner(t, sn1.get("sub"), &ann)
	var rd ring.RingDesc
	require.NoError(t, rd.UnmarshalBinary(ann.Desc))
	var acc struct{ EP []byte }
	inner(t, sn1.get("acc"), &acc)
	var subEP rdma.Endpoint
	require.NoError(t, subEP.UnmarshalBinary(acc.EP))

	refusedBefore := sn.Stats().Rejected["conn"]

	// the outsider's own queue pair, on tcp (another host)
	ed := link.NewDevices(link.DevicesConfig{HostID: "hostE"})
	defer ed.Close()
	dev, err := ed.Get(rdma.ProviderTCP)
	require.NoError(t, err)
	cq, err := dev.CreateCQ(16)
	require.NoError(t, err)
	defer cq.Close()
	qp, err := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 16, RecvDepth: 16})
	require.NoError(t, err)
	defer qp.Close()
	req := bus.ConnectRequest{Topic: "t", Kind: bus.TargetSubscriber, ID: "s", Endpoint: qp.LocalEndpoint()}

	// step 2a: a connect request signed by evil's own key (allowed to
	// subscribe, not to publish)
	evil, _ := open("sec-evil", "hostE", url, kEvil)
	_, err = evil.Connect(ctx, "sec-sub", req)
	require.ErrorIs(t, err, bus.ErrConnectRefused)
	assert.Contains(t, err.Error(), "not allowed")

	// step 2b: the same under the real publisher's node id
	evil2, _ := open("sec-pub", "hostE", url, kEvil)
	_, err = evil2.Connect(ctx, "sec-sub", req)
	require.ErrorIs(t, err, bus.ErrConnectRefused)
	assert.Contains(t, err.Error(), "bound to another key")

	// step 2c: unsigned, as a made-up publisher
	ep, err := qp.LocalEndpoint().MarshalBinary()
	require.NoError(t, err)
	unsigned, err := json.Marshal(map[string]any{"v": 1, "kind": "conn", "topic": "t", "target": "subscriber", "id": "s", "ep": ep,
		"node": map[string]any{"id": "feed-x", "host": "hostE", "inc": 1}})
	require.NoError(t, err)
	m, err := raw.Request("tickbus.qp.sec-sub", unsigned, 5*time.Second)
	require.NoError(t, err)
	var rep struct{ Kind, Code string }
	inner(t, m, &rep)
	assert.Equal(t, "err", rep.Kind)
	assert.Equal(t, "refused", rep.Code)

	// step 2d: a replay of the real publisher's signed request
	m, err = raw.Request("tickbus.qp.sec-sub", sn1.get("conn").Data, 5*time.Second)
	require.NoError(t, err)
	inner(t, m, &rep)
	assert.Equal(t, "err", rep.Kind)
	assert.Equal(t, "refused", rep.Code)

	// step 3: stamps and bodies with the sniffed endpoint and rkey: the
	// ring's queue pair is connected to the real publisher and takes no
	// other connection, so no write of the outsider reaches it
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	err = qp.Connect(cctx, subEP)
	ccancel()
	require.Error(t, err, "the outsider's queue pair reached the subscriber's")
	body := make([]byte, 64)
	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled | rdma.FlagInline, Inline: body,
		Remote: rdma.RemoteAddr{Addr: rd.Region.Addr + ring.RegionHeaderSize, RKey: rd.Region.RKey}}
	if err := qp.PostSend(&wr); err == nil {
		var comp [4]rdma.Completion
		require.Eventually(t, func() bool { return cq.Poll(comp[:]) > 0 }, 5*time.Second, time.Millisecond)
		assert.NotEqual(t, rdma.StatusSuccess, comp[0].Status, "a write of the outsider completed")
	}

	// refused at every step and counted; nothing reached the handler
	st := sn.Stats()
	assert.GreaterOrEqual(t, st.Rejected["conn"]-refusedBefore, uint64(4), "rejected %v", st.Rejected)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, n, c.count())
	c.mu.Lock()
	for i, tk := range c.ticks {
		assert.Equal(t, int64(100+i), tk.Price)
	}
	c.mu.Unlock()
	assert.Equal(t, 1, sub.Publishers())
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
}
