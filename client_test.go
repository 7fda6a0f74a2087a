package tickbus_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
)

// testLease is the lease of the clients the tests connect: the default 1s
// lease fails a home over when the race detector on a loaded machine
// starves its renewals for 3/4 s, and no test here is about failover (a
// home that closes deletes its lease; none dies without closing). A
// test's own WithLeaseTTL comes later and wins.
const testLease = 30 * time.Second

func connect(t *testing.T, opts ...tickbus.Option) *tickbus.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx, append([]tickbus.Option{tickbus.WithLeaseTTL(testLease)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConnect_BadOptions_FailWithErrInvalidOptionNamingTheOption(t *testing.T) {
	for _, tc := range []struct {
		opt  tickbus.Option
		name string
	}{
		{tickbus.WithNATS(), "WithNATS"},
		{tickbus.WithNATS(" , "), "WithNATS"},
		{tickbus.WithEmbeddedNATS("nowhere"), "WithEmbeddedNATS"},
		{tickbus.WithProvider("carrier-pigeon"), "WithProvider"},
		{tickbus.WithTLS("", "cert.pem", ""), "WithTLS"},
		{tickbus.WithTLS("", "", ""), "WithTLS"},
		{tickbus.WithCredentials(""), "WithCredentials"},
		{tickbus.WithNKeySeed(""), "WithNKeySeed"},
		{tickbus.WithUserPassword("", "pw"), "WithUserPassword"},
		{tickbus.WithToken(""), "WithToken"},
		{tickbus.WithNodeID(""), "WithNodeID"},
		{tickbus.WithHostID(""), "WithHostID"},
		{tickbus.WithPrefix(""), "WithPrefix"},
		{tickbus.WithTCPListen("9000", ""), "WithTCPListen"},
		{tickbus.WithConnectTimeout(0), "WithConnectTimeout"},
		{tickbus.WithLeaseTTL(0), "WithLeaseTTL"},
		{tickbus.WithLeaseTTL(99 * time.Millisecond), "WithLeaseTTL"},
		{tickbus.WithUnheardHold(49 * time.Millisecond), "WithUnheardHold"},
		{tickbus.WithAllowPublish("t"), "WithAllowPublish"},
		{tickbus.WithAllowPublish("t", "alice"), "WithAllowPublish"},
		{tickbus.WithAllowSubscribe("", "*"), "WithAllowSubscribe"},
		{tickbus.WithPublisherDefaults(tickbus.WithRate(0)), "WithRate"},
		{tickbus.WithPublisherDefaults(nil), "WithPublisherDefaults"},
		{nil, "Connect"},
	} {
		c, err := tickbus.Connect(context.Background(), tc.opt)
		assert.Nil(t, c)
		require.ErrorIs(t, err, tickbus.ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name)
	}
}

// WithUnheardHold is the bus's hold of a peer it cannot hear; 0 or less
// is none at all, and without it the bus's default applies.
func TestConnect_WithUnheardHold_IsTheBusHold(t *testing.T) {
	for _, tc := range []struct {
		opts []tickbus.Option
		want time.Duration
	}{
		{nil, bus.DefaultUnheardHold},
		{[]tickbus.Option{tickbus.WithUnheardHold(2 * time.Second)}, 2 * time.Second},
		{[]tickbus.Option{tickbus.WithUnheardHold(0)}, -1},
		{[]tickbus.Option{tickbus.WithUnheardHold(-time.Second)}, -1},
	} {
		c := connect(t, tc.opts...)
		assert.Equal(t, tc.want, tickbus.UnheardHold(c), "%v", tc.opts)
	}
}

func TestConnect_WithLeaseTTL_IsTheLeaseBucketsTTL(t *testing.T) {
	const ttl = 7 * time.Second
	c := connect(t, tickbus.WithLeaseTTL(ttl))
	p, err := c.Publisher("lease") // the first publisher makes the buckets
	require.NoError(t, err)
	defer p.Close()
	nc, err := nats.Connect(c.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "tickbus_homes")
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, ttl, st.TTL())
}

func TestConnect_UnreachableServer_FailsWithErrConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tickbus.Connect(ctx, tickbus.WithNATS("nats://127.0.0.1:1"))
	require.ErrorIs(t, err, tickbus.ErrConnect)
}

func TestPublisherAndSubscribe_BadOptions_FailAndChangeNothing(t *testing.T) {
	c := connect(t)
	for _, opt := range []tickbus.PubOption{
		tickbus.WithPublisherID(0), tickbus.WithPublisherName(""), tickbus.WithSlotSize(100), tickbus.WithSlotSize(80), tickbus.WithSlotSize(0),
		tickbus.WithJournal(3), tickbus.WithMaxBatch(0), tickbus.WithPublishTimeout(-time.Second), tickbus.WithPublishIdle(nil), nil,
		tickbus.WithRate(0), tickbus.WithRate(-1), tickbus.WithRate(math.NaN()), tickbus.WithRate(2e9),
	} {
		p, err := c.Publisher("t", opt)
		assert.Nil(t, p)
		assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	}
	h := tickbus.HandlerFuncs{}
	for _, opt := range []tickbus.SubOption{
		tickbus.WithSubscriberName(""), tickbus.WithRing(3, 128), tickbus.WithRing(8, 100), tickbus.WithRing(8, 80), tickbus.WithGapTimeout(0),
		tickbus.WithBatch(0), tickbus.WithPollIdle(nil), tickbus.WithStats(time.Millisecond, func(*tickbus.Stats) {}),
		tickbus.WithStats(time.Second, nil), nil,
	} {
		s, err := c.Subscribe("t", h, opt)
		assert.Nil(t, s)
		assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	}
	_, err := c.Subscribe("t", nil)
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	for _, topic := range []string{"", "a.b c", "*"} {
		_, err = c.Subscribe(topic, h)
		assert.ErrorIs(t, err, tickbus.ErrInvalidOption, "topic %q", topic)
		_, err = c.Publisher(topic)
		assert.ErrorIs(t, err, tickbus.ErrInvalidOption, "topic %q", topic)
	}
	// Nothing was made: a good publisher and subscription still start.
	p, err := c.Publisher("t")
	require.NoError(t, err)
	s, err := c.Subscribe("t", h)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, p.Close())
	// Slots are a multiple of 32: 96 bytes (a tick, or a 64-byte message) is
	// a slot size.
	p, err = c.Publisher("t96", tickbus.WithSlotSize(96))
	require.NoError(t, err)
	s, err = c.Subscribe("t96", h, tickbus.WithRing(8, 96))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, p.Close())
}

// seqs collects delivered sequences and events.
type seqs struct {
	mu     sync.Mutex
	got    []uint64
	events []tickbus.Event
}

func (s *seqs) OnMessages(ms []tickbus.Message) {
	s.mu.Lock()
	for _, m := range ms {
		s.got = append(s.got, m.Seq)
	}
	s.mu.Unlock()
}

func (s *seqs) OnEvent(ev tickbus.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}

func (s *seqs) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func TestClient_TwoClients_TwoPublishersOneOrderEveryTickOnce(t *testing.T) {
	a := connect(t, tickbus.WithNodeID("a"))
	b := connect(t, tickbus.WithNATS(a.URL()), tickbus.WithNodeID("b"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var ha, hb seqs
	sa, err := a.Subscribe("two", &ha, tickbus.WithPollIdle(rdma.Yield{}))
	require.NoError(t, err)
	sb, err := b.Subscribe("two", &hb, tickbus.WithPollIdle(rdma.Yield{}))
	require.NoError(t, err)
	p1, err := a.Publisher("two")
	require.NoError(t, err)
	p2, err := b.Publisher("two")
	require.NoError(t, err)
	require.NoError(t, p1.WaitSubscribers(ctx, 2))
	require.NoError(t, p2.WaitSubscribers(ctx, 2))
	assert.True(t, p1.IsHome() != p2.IsHome(), "one home per topic")

	const n = 500
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := p2.PublishTick(&tickbus.Tick{Instrument: uint64(i + 1), Kind: tickbus.Ask, Price: 1, Size: 1}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := range n {
		_, err := p1.PublishTick(&tickbus.Tick{Instrument: uint64(i + 1), Kind: tickbus.Bid, Price: 1, Size: 1})
		require.NoError(t, err)
	}
	require.NoError(t, <-errc)
	require.Eventually(t, func() bool { return ha.len() == 2*n && hb.len() == 2*n }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, sa.Close())
	require.NoError(t, sb.Close())
	for _, h := range []*seqs{&ha, &hb} {
		for i, s := range h.got {
			require.Equal(t, uint64(i+1), s, "every sequence once, in order")
		}
		assert.Empty(t, h.events)
	}
	assert.Equal(t, uint64(2*n), sa.Counters().Received)
	assert.Zero(t, sa.Counters().Lost())
	require.NoError(t, sa.Err())
}

func TestPublisher_Publish_AllocatesNothing(t *testing.T) {
	c := connect(t)
	s, err := c.Subscribe("alloc", tickbus.HandlerFuncs{}, tickbus.WithRing(1024, 128))
	require.NoError(t, err)
	defer s.Close()
	p, err := c.Publisher("alloc")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	payload := make([]byte, 32)
	tk := tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 5, Size: 1}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := p.Publish(2, payload); err != nil {
			panic(err)
		}
		tk.PubTime = 0
		if _, err := p.PublishTick(&tk); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
	big := make([]byte, p.MaxPayload()+1)
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := p.Publish(2, big); err != tickbus.ErrTooLarge {
			panic(fmt.Sprint(err))
		}
	})
	assert.Zero(t, allocs, "an oversize message is refused without allocating")
}

func TestDecodeTick_RefusesOtherTypesAndMalformedPayloads(t *testing.T) {
	var tk tickbus.Tick
	tk.Instrument = 42
	err := tickbus.DecodeTick(&tickbus.Message{Type: 9, Payload: make([]byte, 56)}, &tk)
	assert.ErrorIs(t, err, tickbus.ErrInvalidTick)
	err = tickbus.DecodeTick(&tickbus.Message{Type: tickbus.TickType, Payload: []byte("short")}, &tk)
	assert.ErrorIs(t, err, tickbus.ErrInvalidTick)
	assert.Equal(t, uint64(42), tk.Instrument, "t unchanged")
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_ = tickbus.DecodeTick(&tickbus.Message{Type: 9}, &tk)
	}))
}

func TestPublisher_BadTick_IsErrInvalidTickAndNothingIsPublished(t *testing.T) {
	c := connect(t)
	p, err := c.Publisher("bad")
	require.NoError(t, err)
	_, err = p.PublishTick(&tickbus.Tick{Instrument: 0, Kind: tickbus.Bid})
	require.ErrorIs(t, err, tickbus.ErrInvalidTick)
	seq, err := p.PublishTick(&tickbus.Tick{Instrument: 1, Kind: tickbus.Bid})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq, "the refused tick took no sequence")
}

func TestClient_Close_ClosesWhatItMadeAndIsIdempotent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx)
	require.NoError(t, err)
	s, err := c.Subscribe("x", tickbus.HandlerFuncs{})
	require.NoError(t, err)
	p, err := c.Publisher("x")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("the subscription's polling did not stop")
	}
	require.NoError(t, s.Wait())
	require.NoError(t, s.Close(), "closing again after the client is fine")
	require.NoError(t, p.Close())
	_, err = p.Publish(1, []byte("late"))
	assert.ErrorIs(t, err, tickbus.ErrClosed)
	_, err = c.Publisher("x")
	assert.ErrorIs(t, err, tickbus.ErrClosed)
	_, err = c.Subscribe("x", tickbus.HandlerFuncs{})
	assert.ErrorIs(t, err, tickbus.ErrClosed)
}

func TestSubscribe_WithStats_GetsIntervalStatistics(t *testing.T) {
	c := connect(t)
	got := make(chan *tickbus.Stats, 4)
	s, err := c.Subscribe("st", tickbus.HandlerFuncs{}, tickbus.WithStats(50*time.Millisecond, func(m *tickbus.Stats) {
		select {
		case got <- m:
		default:
		}
	}))
	require.NoError(t, err)
	defer s.Close()
	select {
	case m := <-got:
		assert.Equal(t, "st", m.Topic)
		_, err := m.LatencyHistogram()
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no stats")
	}
}

func TestErrors_AreDistinctAndPrefixed(t *testing.T) {
	all := []error{tickbus.ErrInvalidOption, tickbus.ErrConnect, tickbus.ErrClosed, tickbus.ErrTooLarge, tickbus.ErrBatchTooLarge,
		tickbus.ErrInvalidTick, tickbus.ErrLost, tickbus.ErrInvalidSequence, tickbus.ErrBackPressure, tickbus.ErrTimeout,
		tickbus.ErrHomeFailed, tickbus.ErrRefused, tickbus.ErrNoHome, tickbus.ErrNoJetStream, tickbus.ErrForbidden, tickbus.ErrDuplicate}
	for i, a := range all {
		assert.Regexp(t, "^tickbus: ", a.Error())
		for j, b := range all {
			if i != j {
				assert.False(t, errors.Is(a, b), "%v is not %v", a, b)
			}
		}
	}
}

func TestClient_Run_PollsOnTheCallerUntilCtxEndsOrTheClientCloses(t *testing.T) {
	c := connect(t)
	var h seqs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx, "run", &h, tickbus.WithPollIdle(rdma.Yield{})) }()
	p, err := c.Publisher("run")
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	require.NoError(t, p.WaitSubscribers(wctx, 1))
	for range 10 {
		_, err := p.Publish(1, []byte("x"))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.len() == 10 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-errc)

	go func() { errc <- c.Run(context.Background(), "run2", &h) }()
	time.Sleep(100 * time.Millisecond) // let Run subscribe (Close before it does is fine too: ErrClosed)
	require.NoError(t, c.Close())
	err = <-errc
	if err != nil {
		assert.ErrorIs(t, err, tickbus.ErrClosed)
	}
}

func TestSubscribe_WithManualPoll_DeliversOnlyInsidePoll(t *testing.T) {
	c := connect(t)
	var h seqs
	s, err := c.Subscribe("manual", &h, tickbus.WithManualPoll())
	require.NoError(t, err)
	p, err := c.Publisher("manual")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	for range 5 {
		_, err := p.Publish(1, []byte("m"))
		require.NoError(t, err)
	}
	assert.Zero(t, h.len(), "nothing is delivered without Poll")
	for h.len() < 5 && ctx.Err() == nil {
		s.Poll()
	}
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, h.got)
	assert.Zero(t, testing.AllocsPerRun(100, func() { s.Poll() }))
	require.NoError(t, s.Close())

	auto, err := c.Subscribe("manual", &h, tickbus.WithSubscriberName("auto"))
	require.NoError(t, err)
	assert.Zero(t, auto.Poll(), "Poll does nothing on a subscription that polls itself")
	require.NoError(t, auto.Close())
}

func TestClient_WatchStats_SeesTheSubscriptionsOfItsPrefixOnly(t *testing.T) {
	a := connect(t)
	b := connect(t, tickbus.WithNATS(a.URL()))
	other := connect(t, tickbus.WithNATS(a.URL()), tickbus.WithPrefix("elsewhere"))
	got := make(chan string, 16)
	w, err := b.WatchStats("", func(subject string, msg []byte) {
		select {
		case got <- subject:
		default:
		}
	})
	require.NoError(t, err)
	defer w.Stop()
	var stray atomic.Int64
	wo, err := other.WatchStats("", func(string, []byte) { stray.Add(1) })
	require.NoError(t, err)
	s, err := a.Subscribe("watched", tickbus.HandlerFuncs{}, tickbus.WithStats(20*time.Millisecond, func(*tickbus.Stats) {}))
	require.NoError(t, err)
	select {
	case subj := <-got:
		assert.Contains(t, subj, "watched")
	case <-time.After(10 * time.Second):
		t.Fatal("no stats message")
	}
	require.NoError(t, s.Close()) // publishes its last stats
	require.NoError(t, wo.Stop())
	assert.Zero(t, stray.Load(), "another prefix is another bus")
	n, err := w.Dropped()
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, w.Stop())
	require.NoError(t, w.Stop(), "idempotent")
	_, err = b.WatchStats("", nil)
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	_, err = b.WatchStats("bad topic", func(string, []byte) {})
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
}

// A subscription or publisher still being made when Close begins is closed
// before the devices it uses are (it used to drain an unmapped ring:
// SIGSEGV), and its maker gets nil or ErrClosed.
func TestClient_CloseWhileMaking_WaitsForWhatIsBeingMade(t *testing.T) {
	srv := connect(t)
	for i := range 8 {
		c := connect(t, tickbus.WithNATS(srv.URL()))
		errs := make(chan error, 3)
		go func() { errs <- c.Run(context.Background(), "mk", tickbus.HandlerFuncs{}) }()
		go func() {
			s, err := c.Subscribe("mk", tickbus.HandlerFuncs{}, tickbus.WithSubscriberName("s"))
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
		go func() {
			p, err := c.Publisher("mk")
			if err == nil {
				err = p.Close()
			}
			errs <- err
		}()
		time.Sleep(time.Duration(i) * 5 * time.Millisecond)
		require.NoError(t, c.Close())
		for range 3 {
			if err := <-errs; err != nil {
				assert.ErrorIs(t, err, tickbus.ErrClosed)
			}
		}
	}
}
