package subscriber

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/devices"
	"github.com/tickbus/tickbus/internal/stats"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// Handler receives what the ring delivers, in sequence order, on the
// polling goroutine. Views in ticks die when OnTicks returns.
type Handler interface {
	OnTicks(ticks []ring.Tick)
	OnEvent(ev ring.Event)
}

// Counters are a subscriber's totals, in sequences.
type Counters struct {
	Received  uint64 // delivered ticks (recovered ones included)
	Gaps      uint64 // claimed but never written
	Overruns  uint64 // overwritten before they were read (lossy)
	Skips     uint64 // declared missing by a publisher
	Corrupt   uint64 // slots that failed their check
	Recovered uint64 // delivered from the journal
	Next      uint64 // the next sequence the ring waits for
	// JoinedAt is the first sequence delivered (0: none yet); BeforeJoin
	// the sequences before it, published before this ring was written to.
	JoinedAt   uint64
	BeforeJoin uint64
}

// Lost is every sequence passed and not delivered.
func (c Counters) Lost() uint64 { return c.Gaps + c.Overruns + c.Skips + c.Corrupt }

// Subscriber is one topic's ring in this process and its presence on the
// bus. Poll (or Run) from one goroutine; the rest is safe from any.
type Subscriber struct {
	cfg    Config
	node   *bus.Node
	devs   *devices.Set
	dev    rdma.Device
	ring   *ring.Ring
	reader *ring.Reader
	sub    *bus.Subscription
	log    zerolog.Logger

	// Hot path: the polling goroutine.
	h   recHandler
	rec *stats.Recorder

	rep        *stats.Reporter
	joinLogged bool // stats goroutine, then Close
	stopStats  chan struct{}
	statsDone  chan struct{}

	stop    atomic.Bool // Run returns when set
	running sync.Mutex  // held by Run; Close waits on it

	mu     sync.Mutex
	qps    map[string][]conn // publisher key → its queue pairs to this ring
	closed bool

	final atomic.Pointer[Counters] // set before the ring is unmapped

	closeOnce sync.Once
	closeErr  error
}

type conn struct {
	qp rdma.QueuePair
	cq rdma.CompletionQueue
}

// recHandler records each tick's latency, then calls the user's handler.
//
// Joining: a ring announced while the topic is running starts at sequence
// 1, so until its first tick arrives the reader reports the sequences
// published before any publisher wrote into it as gaps or overruns. Those
// were never this subscriber's: they are counted apart (BeforeJoin), not
// passed to the handler, and the first delivered sequence is JoinedAt.
type recHandler struct {
	user   Handler
	rec    *stats.Recorder
	joined bool // polling goroutine only

	joinedAt    atomic.Uint64 // first delivered sequence; written once by the poller
	joinGap     atomic.Uint64 // gap sequences before joinedAt
	joinOverrun atomic.Uint64 // overrun sequences before joinedAt
}

func (h *recHandler) OnTicks(ts []ring.Tick) {
	now := time.Now().UnixNano() // the one timestamp per batch
	for i := range ts {
		h.rec.Record(now - ts[i].PublishNs)
	}
	if !h.joined {
		h.joined = true
		h.joinedAt.Store(ts[0].Seq) // pairs with the Load in Counters
	}
	if h.user != nil {
		h.user.OnTicks(ts)
	}
}

func (h *recHandler) OnEvent(ev ring.Event) {
	if !h.joined {
		switch ev.Kind {
		case ring.EventGap:
			h.joinGap.Add(ev.Count())
			return
		case ring.EventOverrun:
			h.joinOverrun.Add(ev.Count())
			return
		}
	}
	if h.user != nil {
		h.user.OnEvent(ev)
	}
}

// New registers a ring on the configured provider's device, announces it
// on node and starts the stats loop. h may be nil (ticks are only counted
// and timed). The node and the device set stay the caller's.
func New(ctx context.Context, node *bus.Node, devs *devices.Set, cfg Config, h Handler) (*Subscriber, error) {
	if node == nil || devs == nil {
		return nil, fmt.Errorf("%w: node and devices are required", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = node.ID()
	}
	s := &Subscriber{cfg: cfg, node: node, devs: devs, log: cfg.Logger.With().Str("topic", cfg.Topic).Str("subscriber", cfg.ID).Logger(),
		qps: map[string][]conn{}, rec: stats.NewRecorder()}
	s.h = recHandler{user: h, rec: s.rec}
	dev, err := devs.Get(cfg.Provider)
	if err != nil {
		return nil, err
	}
	s.dev = dev
	s.ring, err = ring.NewRing(dev, ring.RingConfig{Slots: cfg.Slots, SlotSize: cfg.SlotSize, Mode: cfg.Mode,
		GapTimeout: cfg.GapTimeout, MaxBatch: cfg.MaxBatch, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	s.reader = s.ring.Reader()
	desc, err := s.ring.Desc().MarshalBinary()
	if err != nil {
		_ = s.ring.Close()
		return nil, fmt.Errorf("subscriber: ring descriptor: %w", err)
	}
	mode := bus.ModeLossy
	if cfg.Mode == ring.Reliable {
		mode = bus.ModeReliable
	}
	s.sub, err = node.Subscribe(ctx, bus.SubscribeSpec{
		Topic: cfg.Topic, ID: cfg.ID, Mode: mode, Ring: desc,
		Accept:          s.accept,
		OnPublisher:     func(p bus.PublisherInfo) { s.log.Info().Str("publisher", p.Key()).Msg("subscriber: publisher up") },
		OnPublisherGone: s.publisherGone,
	})
	if err != nil {
		_ = s.ring.Close()
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	s.rep = stats.NewReporter(stats.Meta{Topic: cfg.Topic, Subscriber: cfg.ID, Host: node.HostID(), Provider: cfg.Provider}, s.rec)
	s.stopStats = make(chan struct{})
	s.statsDone = make(chan struct{})
	if cfg.StatsInterval > 0 {
		go s.statsLoop()
	} else {
		close(s.statsDone)
	}
	s.log.Info().Stringer("mode", cfg.Mode).Int("slots", cfg.Slots).Str("provider", cfg.Provider).Msg("subscriber: up")
	return s, nil
}

// accept serves a publisher's connect: a queue pair on the ring's device,
// connected to the publisher's, and the ring's descriptor.
func (s *Subscriber) accept(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	if req.Endpoint.Provider != s.dev.Provider() {
		return bus.ConnectReply{}, fmt.Errorf("%w: this ring is on %s, the publisher came over %s (set bus.provider to %s on both)",
			ErrRefused, s.dev.Provider(), req.Endpoint.Provider, s.dev.Provider())
	}
	cq, err := s.dev.CreateCQ(256)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	qp, err := s.dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64, RecvDepth: 16})
	if err != nil {
		_ = cq.Close()
		return bus.ConnectReply{}, err
	}
	if err := qp.Connect(ctx, req.Endpoint); err != nil {
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, err
	}
	desc, err := s.ring.Desc().MarshalBinary()
	if err != nil {
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, err
	}
	key := req.From.ID + "/" + req.ID
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, ErrClosed
	}
	s.qps[key] = append(s.qps[key], conn{qp: qp, cq: cq})
	s.mu.Unlock()
	s.log.Info().Str("publisher", key).Str("provider", req.Endpoint.Provider).Msg("subscriber: publisher connected")
	return bus.ConnectReply{Endpoint: qp.LocalEndpoint(), Region: desc}, nil
}

// publisherGone closes the queue pairs of a publisher that left.
func (s *Subscriber) publisherGone(p bus.PublisherInfo, reason error) {
	s.mu.Lock()
	cs := s.qps[p.Key()]
	delete(s.qps, p.Key())
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.qp.Close()
		_ = c.cq.Close()
	}
	s.log.Info().Str("publisher", p.Key()).Err(reason).Msg("subscriber: publisher gone")
}

// Poll delivers what is ready to the handler and returns how much it
// delivered (ticks plus events), for an idle strategy. It allocates
// nothing, takes no lock and makes no syscall. One goroutine polls.
func (s *Subscriber) Poll() int { return s.reader.Poll(&s.h) }

// ReadInto copies the next tick into t and its payload into buf; see
// ring.Reader.ReadInto. Its latency is recorded as with Poll.
func (s *Subscriber) ReadInto(t *ring.Tick, buf []byte) (ok bool, ev ring.Event, err error) {
	ok, ev, err = s.reader.ReadInto(t, buf)
	if ok {
		s.rec.Record(time.Now().UnixNano() - t.PublishNs)
	}
	return ok, ev, err
}

// Run polls until ctx ends or Close is called, through Config.Idle. It
// returns nil when stopped by Close, else ctx's error.
func (s *Subscriber) Run(ctx context.Context) error {
	s.running.Lock()
	defer s.running.Unlock()
	if s.stop.Load() {
		return ErrClosed
	}
	done := make(chan struct{})
	defer close(done)
	var ctxDone atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			ctxDone.Store(true)
		case <-done:
		}
	}()
	idle := s.cfg.Idle
	for !s.stop.Load() && !ctxDone.Load() {
		idle.Idle(s.reader.Poll(&s.h))
	}
	if s.stop.Load() {
		return nil
	}
	return ctx.Err()
}

// Counters returns the totals now; safe from any goroutine.
func (s *Subscriber) Counters() Counters {
	if f := s.final.Load(); f != nil {
		return *f // the ring is unmapped
	}
	jg, jo := s.h.joinGap.Load(), s.h.joinOverrun.Load() // before Stats: never more than it counted
	st := s.reader.Stats()
	return Counters{Received: st.Delivered, Gaps: st.Gap - jg, Overruns: st.Overrun - jo, Skips: st.Skip,
		Corrupt: st.Corrupt, Recovered: st.Recovered, Next: st.Next,
		JoinedAt: s.h.joinedAt.Load(), BeforeJoin: jg + jo}
}

// Topic is the topic subscribed.
func (s *Subscriber) Topic() string { return s.cfg.Topic }

// ID is the subscriber id.
func (s *Subscriber) ID() string { return s.cfg.ID }

// Publishers is how many publishers are connected to the ring now.
func (s *Subscriber) Publishers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.qps)
}

func (s *Subscriber) statsLoop() {
	defer close(s.statsDone)
	t := time.NewTicker(s.cfg.StatsInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopStats:
			return
		case <-t.C:
			s.publishStats()
		}
	}
}

// publishStats ends the recorder's interval, publishes it and hands it to
// OnStats. A failure to publish (NATS away) is logged once per state change
// in the caller's logger; the counters are totals, so nothing is lost.
func (s *Subscriber) publishStats() {
	c := s.Counters()
	if !s.joinLogged && c.JoinedAt != 0 {
		s.joinLogged = true
		s.log.Info().Uint64("seq", c.JoinedAt).Uint64("earlier", c.BeforeJoin).Msg("subscriber: first tick")
	}
	m, err := s.rep.Next(stats.Counters{Received: c.Received, Gaps: c.Gaps, Overruns: c.Overruns})
	if err != nil {
		s.log.Warn().Err(err).Msg("subscriber: stats interval")
		return
	}
	if b, err := stats.Encode(m); err == nil {
		if err := s.node.PublishStats(s.cfg.Topic, s.cfg.ID, b); err != nil {
			s.log.Debug().Err(err).Msg("subscriber: publish stats")
		}
	}
	if s.cfg.OnStats != nil {
		s.cfg.OnStats(m)
	}
}

// Close withdraws the subscription (publishers stop writing and drop their
// queue pairs), stops Run, drains what the ring already holds to the
// handler, publishes the last stats, closes the queue pairs and unmaps the
// ring. Do not call it while Poll runs on another goroutine (Run is fine).
// Idempotent.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		errs = append(errs, s.sub.Close())
		s.stop.Store(true)
		s.running.Lock() // Run has returned
		s.drain()
		close(s.stopStats)
		<-s.statsDone
		if s.cfg.StatsInterval > 0 {
			s.publishStats() // the last interval, totals final
		}
		s.mu.Lock()
		s.closed = true
		qps := s.qps
		s.qps = map[string][]conn{}
		s.mu.Unlock()
		for _, cs := range qps {
			for _, c := range cs {
				errs = append(errs, c.qp.Close(), c.cq.Close())
			}
		}
		final := s.Counters()
		s.final.Store(&final)
		errs = append(errs, s.ring.Close())
		s.running.Unlock()
		s.closeErr = errors.Join(errs...)
		s.log.Info().Uint64("received", s.Counters().Received).Msg("subscriber: closed")
	})
	return s.closeErr
}

// drain polls until nothing arrived for DrainQuiet, at most 2 s.
func (s *Subscriber) drain() {
	end := time.Now().Add(2 * time.Second)
	last := time.Now()
	for now := last; now.Before(end) && now.Sub(last) < s.cfg.DrainQuiet; now = time.Now() {
		if s.reader.Poll(&s.h) > 0 {
			last = now
			continue
		}
		time.Sleep(time.Millisecond)
	}
}
