package subscriber

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
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
	// the sequences lost while the ring was joining a publisher (see
	// recHandler): published before that publisher wrote into this ring.
	JoinedAt   uint64
	BeforeJoin uint64
	// StartedAt is where the ring started when it joined a running topic
	// (the home's counter then); 0 if it started at the topic's beginning.
	StartedAt uint64
	// Join counts sequences reported as ring.EventJoin: published before a
	// publisher that joined later had added this ring.
	Join uint64
	// Epoch counts sequences reported as ring.EventEpoch: reserved by a
	// home that failed over and never written (mostly never handed out).
	Epoch uint64
	// Credits is how many publishers' credit cells the reader writes its
	// position into (reliable mode); JournalEpoch the epoch of the home
	// whose journal is attached (0: none).
	Credits      int
	JournalEpoch uint64
	// Rate is ticks per second over the last stats interval (0 with the
	// stats loop off).
	Rate float64
}

// Lost is every sequence passed and not delivered that a publisher wrote
// or claimed: gaps, overruns, skips, corrupt slots. Join and Epoch are
// counted apart: those sequences were never this ring's to receive.
func (c Counters) Lost() uint64 { return c.Gaps + c.Overruns + c.Skips + c.Corrupt }

// Subscriber is one topic's ring in this process and its presence on the
// bus. Poll (or Run) from one goroutine; the rest is safe from any.
type Subscriber struct {
	cfg    Config
	node   *bus.Node
	devs   *link.Devices
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

	startAt   atomic.Uint64 // the home's counter as learnStart learnt it (0: not yet)
	accepting atomic.Int32  // learnStart calls in flight
	restartAt atomic.Uint64 // unstick's counter (0: none)
	done      chan struct{} // closed by Close: unstick goroutines return
	wg        sync.WaitGroup
	rate      atomic.Uint64 // float64 bits: ticks/s over the last stats interval
	credits   atomic.Int32  // credit cells attached
	journalAt atomic.Uint64 // epoch of the attached journal

	stop    atomic.Bool // Run returns when set
	running sync.Mutex  // held by Run; Close waits on it

	cq           rdma.CompletionQueue // the reader's: journal READs, credit WRITEs
	journalEpoch uint64               // bus event goroutine: the epoch whose journal is attached or being attached
	journalQPs   []rdma.QueuePair     // guarded by mu: QPs to homes' journals, closed at Close

	mu     sync.Mutex
	qps    map[string][]conn // publisher key → its queue pairs to this ring
	also   link.AlsoOn       // the ring registered on other providers' devices too
	used   map[string]bool   // every provider a publisher connected over
	closed bool

	final atomic.Pointer[Counters] // set before the ring is unmapped

	closeOnce sync.Once
	closeErr  error
}

type conn struct {
	qp       rdma.QueuePair
	cq       rdma.CompletionQueue
	provider string
	host     string // the publisher's host id
}

// recHandler records each tick's latency, then calls the user's handler.
//
// Joining. A ring is written to by each publisher only from the moment that
// publisher added it; sequences claimed before are never written into it,
// and the reader reports them as gaps or overruns. Before the ring's first
// tick those are counted apart (Counters.BeforeJoin, logged) and not passed
// to the handler: the subscriber's stream starts at its first tick. After
// it, whenever a publisher is announced that has not delivered a tick yet,
// until it has or until JoinGrace after the last publisher connected, a
// gap or overrun is handed to the handler as ring.EventJoin (counted in
// Counters.Join): never hidden, but told apart from a loss of a running
// stream. Outside those windows every loss is a gap or overrun.
type recHandler struct {
	user   Handler
	rec    *stats.Recorder
	joined bool // polling goroutine only

	joining      atomic.Bool  // a known publisher has not delivered yet
	joinDeadline atomic.Int64 // unix ns after which joining no longer excuses losses
	joinMu       sync.Mutex   // pending and seen; taken only while joining
	pending      map[uint32]struct{}
	seen         map[uint32]struct{}

	joinedAt    atomic.Uint64 // first delivered sequence; written once by the poller
	startedAt   atomic.Uint64 // the reader was moved here by StartAt (0: not moved)
	joinGap     atomic.Uint64 // gap sequences lost while joining
	joinOverrun atomic.Uint64 // overrun sequences lost while joining
	joinSkipped atomic.Uint64 // sequences a restart (unstick) passed over; the ring never saw them
	joinEpoch   atomic.Uint64 // epoch sequences passed before the first tick
	lateGap     atomic.Uint64 // gap sequences handed out as EventJoin
	lateOverrun atomic.Uint64 // overrun sequences handed out as EventJoin
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
	if h.joining.Load() { // pairs with the Store in publisherUp
		h.delivered(ts)
	}
	if h.user != nil {
		h.user.OnTicks(ts)
	}
}

// delivered marks the publishers of ts as joined (join window only).
func (h *recHandler) delivered(ts []ring.Tick) {
	h.joinMu.Lock()
	for i := range ts {
		id := ts[i].Publisher
		if _, ok := h.pending[id]; ok {
			delete(h.pending, id)
		}
		h.seen[id] = struct{}{}
	}
	if len(h.pending) == 0 {
		h.joining.Store(false)
	}
	h.joinMu.Unlock()
}

// publisherUp notes a publisher that has not delivered yet.
func (h *recHandler) publisherUp(id uint32, grace time.Duration) {
	h.joinMu.Lock()
	if _, ok := h.seen[id]; !ok {
		h.pending[id] = struct{}{}
		h.joining.Store(true)
	}
	h.joinMu.Unlock()
	h.extend(grace)
}

// extend keeps the join window open for grace from now.
func (h *recHandler) extend(grace time.Duration) {
	h.joinDeadline.Store(time.Now().Add(grace).UnixNano())
}

func (h *recHandler) OnEvent(ev ring.Event) {
	switch ev.Kind {
	case ring.EventGap, ring.EventOverrun:
		if !h.joined {
			if ev.Kind == ring.EventGap {
				h.joinGap.Add(ev.Count())
			} else {
				h.joinOverrun.Add(ev.Count())
			}
			return
		}
		if h.joining.Load() && time.Now().UnixNano() < h.joinDeadline.Load() {
			if ev.Kind == ring.EventGap {
				h.lateGap.Add(ev.Count())
			} else {
				h.lateOverrun.Add(ev.Count())
			}
			ev.Kind = ring.EventJoin
		}
	case ring.EventEpoch:
		if !h.joined {
			h.joinEpoch.Add(ev.Count())
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
func New(ctx context.Context, node *bus.Node, devs *link.Devices, cfg Config, h Handler) (*Subscriber, error) {
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
		qps: map[string][]conn{}, used: map[string]bool{}, rec: stats.NewRecorder(), done: make(chan struct{})}
	s.h = recHandler{user: h, rec: s.rec, pending: map[uint32]struct{}{}, seen: map[uint32]struct{}{}}
	dev, err := devs.Get(cfg.Provider)
	if err != nil {
		return nil, err
	}
	s.dev = dev
	// The reader's CQ: its journal READs and credit WRITEs complete there.
	if s.cq, err = dev.CreateCQ(1024); err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	s.ring, err = ring.NewRing(dev, ring.RingConfig{Slots: cfg.Slots, SlotSize: cfg.SlotSize, Mode: cfg.Mode,
		GapTimeout: cfg.GapTimeout, MaxBatch: cfg.MaxBatch, CQ: s.cq, Logger: cfg.Logger})
	if err != nil {
		_ = s.cq.Close()
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
	sub, err := node.Subscribe(ctx, bus.SubscribeSpec{
		Topic: cfg.Topic, ID: cfg.ID, Mode: mode, Ring: desc,
		Accept:          s.accept,
		OnPublisher:     s.publisherUp,
		OnPublisherGone: s.publisherGone,
		OnHome:          s.onHome,
	})
	if err != nil {
		_ = s.ring.Close()
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	s.mu.Lock() // accept may already run on the bus's goroutines
	s.sub = sub
	s.mu.Unlock()
	s.rep = stats.NewReporter(stats.Meta{Topic: cfg.Topic, Subscriber: cfg.ID, Host: node.HostID()}, s.rec)
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
	prov := req.Endpoint.Provider
	dev, mr, desc, err := s.deviceFor(prov)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	// the publisher's peer reaches the ring, nothing else of this device
	lc, err := link.OpenConfined(dev, link.Responder)
	if err == nil {
		err = ring.Grant(lc.QP, mr, mr.Access()&rdma.AccessRemote)
		if err != nil {
			_ = lc.Close()
		}
	}
	if err != nil {
		return bus.ConnectReply{}, err
	}
	qp, cq := lc.QP, lc.CQ
	if err := qp.Connect(ctx, req.Endpoint); err != nil {
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, err
	}
	if s.h.joinedAt.Load() == 0 {
		s.learnStart(ctx, req.From)
		s.wg.Add(1)
		go s.unstick(req.From)
	}
	key := req.From.ID + "/" + req.ID
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, ErrClosed
	}
	s.qps[key] = append(s.qps[key], conn{qp: qp, cq: cq, provider: prov, host: req.From.HostID})
	s.used[prov] = true
	s.mu.Unlock()
	s.h.extend(s.cfg.JoinGrace)
	if s.cfg.Mode == ring.Reliable && prov == s.dev.Provider() && len(req.Data) > 0 {
		s.wg.Add(1)
		go s.attachCredit(req.From, string(req.Data)) // Data: the publisher's id
	}
	s.log.Info().Str("publisher", key).Str("provider", prov).Str("publisher_host", req.From.HostID).Msg("subscriber: publisher connected")
	return bus.ConnectReply{Endpoint: qp.LocalEndpoint(), Region: desc}, nil
}

// publisherUp notes a publisher: until it delivers a tick (or JoinGrace
// after it connected) the ring is joining it.
func (s *Subscriber) publisherUp(p bus.PublisherInfo) {
	if len(p.Data) == 4 {
		s.h.publisherUp(binary.LittleEndian.Uint32(p.Data), s.cfg.JoinGrace)
	}
	s.log.Info().Str("publisher", p.Key()).Msg("subscriber: publisher up")
}

// onHome: the topic's home record (its epoch and reservation). A new epoch
// makes the reader report what the old one reserved and never wrote as
// one ring.EventEpoch; the reservation bounds which stamps it trusts.
func (s *Subscriber) onHome(hi bus.HomeInfo) {
	s.reader.SetEpoch(hi.Start, hi.Reserved)
	s.log.Debug().Uint64("epoch", hi.Epoch).Uint64("start", hi.Start).Uint64("reserved", hi.Reserved).Str("home", hi.Node.ID).
		Msg("subscriber: home record")
	if len(hi.Descriptor) > 0 && hi.Epoch != s.journalEpoch {
		s.journalEpoch = hi.Epoch
		s.wg.Add(1)
		go s.attachJournal(hi)
	}
}

// attachCredit connects a queue pair to the credit cell the publisher
// keeps for this ring and gives it to the reader, which then WRITEs its
// position there; until then (or if this fails) the publisher READs the
// ring's head when the ring looks full.
func (s *Subscriber) attachCredit(from bus.PeerInfo, pubID string) {
	defer s.wg.Done()
	qp, err := s.dev.CreateQP(rdma.QPConfig{SendCQ: s.cq, RecvCQ: s.cq, SendDepth: 64, RecvDepth: 16})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var rep bus.ConnectReply
	for attempt := 0; ; attempt++ { // the publisher adds the ring (and its cell) after our accept returns
		select {
		case <-s.done:
			_ = qp.Close()
			return
		case <-ctx.Done():
			_ = qp.Close()
			s.log.Info().Err(err).Str("publisher", from.ID+"/"+pubID).Msg("subscriber: credit cell not attached; the publisher reads the ring's head instead")
			return
		case <-time.After(time.Duration(min(attempt, 5)) * 50 * time.Millisecond):
		}
		rep, err = s.node.Connect(ctx, from.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetPublisher, ID: pubID,
			Endpoint: qp.LocalEndpoint(), Data: []byte(s.cfg.ID)})
		if err == nil {
			break
		}
	}
	var cd ring.CreditDesc
	if err = qp.Connect(ctx, rep.Endpoint); err == nil {
		if err = cd.UnmarshalBinary(rep.Region); err == nil {
			err = s.reader.AddCredit(qp, cd)
		}
	}
	if err != nil {
		_ = qp.Close()
		s.log.Info().Err(err).Str("publisher", from.ID+"/"+pubID).Msg("subscriber: credit cell not attached")
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.journalQPs = append(s.journalQPs, qp)
	}
	s.mu.Unlock()
	if closed {
		_ = qp.Close()
	}
	s.credits.Add(1)
	s.log.Info().Str("publisher", from.ID+"/"+pubID).Msg("subscriber: credit cell attached")
}

// attachJournal connects a queue pair to the home's journal and gives it
// to the reader, so gaps and overruns are recovered from it and a claimant
// that died on the last tick of a burst is found (the reader READs the
// home's counter). Each new epoch's home replaces the last one's journal.
func (s *Subscriber) attachJournal(hi bus.HomeInfo) {
	defer s.wg.Done()
	var hd ring.HomeDesc
	if err := hd.UnmarshalBinary(hi.Descriptor); err != nil {
		s.reader.DropJournal()
		s.log.Warn().Err(err).Str("home", hi.Node.ID).Msg("subscriber: home descriptor unreadable; no journal")
		return
	}
	// Whatever keeps this epoch's journal from being attached, the old
	// epoch's goes: it holds nothing of the new epoch, and a home that went
	// away would make every recovery wait for its READs (a chaos run's
	// lossy subscriber delivered nothing for 30 s).
	if hd.JournalSlots == 0 {
		s.reader.DropJournal()
		return
	}
	if prov := s.node.ProviderFor(hi.Node); prov != s.dev.Provider() {
		s.reader.DropJournal()
		s.log.Info().Str("home", hi.Node.ID).Str("provider", prov).Msg("subscriber: the home's journal is on another provider than the ring; not attached")
		return
	}
	qp, err := s.dev.CreateQP(rdma.QPConfig{SendCQ: s.cq, RecvCQ: s.cq, SendDepth: 16, RecvDepth: 16})
	if err != nil {
		s.log.Warn().Err(err).Msg("subscriber: journal queue pair")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = func() error {
		var rep bus.ConnectReply
		var err error
		for attempt := 0; attempt < 10; attempt++ { // the record can come before the home answers
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			if rep, err = s.node.Connect(ctx, hi.Node.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetHome, Endpoint: qp.LocalEndpoint()}); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
		if err := qp.Connect(ctx, rep.Endpoint); err != nil {
			return err
		}
		var rd ring.HomeDesc // the home as registered on this provider's device
		if err := rd.UnmarshalBinary(rep.Region); err != nil {
			return err
		}
		return s.reader.SetJournal(s.dev, qp, rd, 100*time.Millisecond)
	}()
	if err != nil {
		_ = qp.Close()
		s.reader.DropJournal()
		s.log.Info().Err(err).Str("home", hi.Node.ID).Msg("subscriber: journal not attached")
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.journalQPs = append(s.journalQPs, qp)
	}
	s.mu.Unlock()
	if closed {
		_ = qp.Close()
		return
	}
	s.journalAt.Store(hi.Epoch)
	s.log.Info().Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Uint32("slots", hd.JournalSlots).Msg("subscriber: journal attached")
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
func (s *Subscriber) Poll() int {
	if !s.h.joined {
		s.maybeStart()
	}
	return s.reader.Poll(&s.h)
}

// maybeStart moves a ring that has delivered nothing to the start
// learnStart found (polling goroutine), once no publisher is between
// learning it and being answered.
func (s *Subscriber) maybeStart() {
	if s.accepting.Load() != 0 { // pairs with the Add in learnStart
		return
	}
	if v := s.restartAt.Load(); v > s.reader.Next() { // pairs with the Store in unstick
		skipped := v - s.reader.Next()
		if err := s.reader.StartAt(v); err == nil {
			s.h.startedAt.Store(v)
			s.h.joinSkipped.Add(skipped) // counted as lost while joining, never silent
		}
		return
	}
	if v := s.startAt.Load(); v > s.reader.Next() { // pairs with the CAS in learnStart
		if err := s.reader.StartAt(v); err == nil {
			s.h.startedAt.Store(v)
		}
	}
}

// learnStart runs in accept, before the publisher is answered, so before
// it can add the ring: it asks the topic's home for its counter. Nothing
// below that counter can be written into this ring by this publisher, so a
// ring joining a running topic starts there (the minimum over publishers
// connecting together). The home lives with a publisher: the one
// connecting, or one already known.
func (s *Subscriber) learnStart(ctx context.Context, from bus.PeerInfo) {
	s.accepting.Add(1)
	defer s.accepting.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, time.Second) // leave the publisher's connect time to finish
	defer cancel()
	nodes := []bus.PeerInfo{from}
	for _, p := range s.publishers() {
		if p.Node.ID != from.ID {
			nodes = append(nodes, p.Node)
		}
	}
	for _, n := range nodes {
		c, err := s.askCounter(ctx, n)
		if err != nil {
			if !errors.Is(err, bus.ErrUnknownTarget) {
				s.log.Debug().Err(err).Str("node", n.ID).Msg("subscriber: ask the home for its counter")
			}
			continue
		}
		for {
			old := s.startAt.Load()
			if old != 0 && old <= c || s.startAt.CompareAndSwap(old, c) {
				return
			}
		}
	}
	s.log.Warn().Msg("subscriber: the topic's home did not answer; the ring starts at sequence 1")
}

// unstick covers what learnStart cannot: the reader waits at the counter
// it learnt, but the sequences from there to the first one the publisher
// wrote after adding the ring are never written, and when they are more
// than the reader's gap scan reaches it would wait until the ring laps. If
// nothing was delivered JoinGrace after the connect, it learns the counter
// again and the reader restarts there; the sequences passed over are
// counted in BeforeJoin.
func (s *Subscriber) unstick(from bus.PeerInfo) {
	defer s.wg.Done()
	select {
	case <-time.After(s.cfg.JoinGrace):
	case <-s.done:
		return
	}
	if s.h.joinedAt.Load() != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes := []bus.PeerInfo{from}
	for _, p := range s.publishers() {
		nodes = append(nodes, p.Node)
	}
	for _, n := range nodes {
		if c, err := s.askCounter(ctx, n); err == nil {
			if s.h.joinedAt.Load() == 0 {
				s.restartAt.Store(c) // pairs with the Load in maybeStart
				s.log.Info().Uint64("seq", c).Msg("subscriber: nothing arrived since joining; restarting the ring at the home's counter")
			}
			return
		}
	}
}

// publishers lists the topic's publishers the bus reported (none before
// Subscribe returned).
func (s *Subscriber) publishers() []bus.PublisherInfo {
	s.mu.Lock()
	sub := s.sub
	s.mu.Unlock()
	if sub == nil {
		return nil
	}
	return sub.Publishers()
}

// askCounter asks the topic's home on node (if it is there) for its
// counter, through the bus's queue-pair exchange over the provider that
// reaches node; the queue pair is closed at once, never used.
func (s *Subscriber) askCounter(ctx context.Context, node bus.PeerInfo) (uint64, error) {
	dev, err := s.devs.Get(s.node.ProviderFor(node))
	if err != nil {
		return 0, err
	}
	c, err := link.OpenConfined(dev, link.Query) // the home reaches nothing here
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rep, err := s.node.Connect(ctx, node.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetHome, Endpoint: c.QP.LocalEndpoint()})
	if err != nil {
		return 0, err
	}
	if len(rep.Data) != 8 {
		return 0, fmt.Errorf("subscriber: home's counter reply of %d bytes, want 8", len(rep.Data))
	}
	return binary.LittleEndian.Uint64(rep.Data), nil
}

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
		idle.Idle(s.Poll())
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
	lg, lo, je := s.h.lateGap.Load(), s.h.lateOverrun.Load(), s.h.joinEpoch.Load()
	st := s.reader.Stats()
	return Counters{Received: st.Delivered, Gaps: st.Gap - jg - lg, Overruns: st.Overrun - jo - lo, Skips: st.Skip,
		Join: lg + lo, Epoch: st.Epoch - je, Credits: int(s.credits.Load()), JournalEpoch: s.journalAt.Load(),
		Corrupt: st.Corrupt, Recovered: st.Recovered, Next: st.Next,
		JoinedAt: s.h.joinedAt.Load(), BeforeJoin: jg + jo + je + s.h.joinSkipped.Load(), StartedAt: s.h.startedAt.Load(),
		Rate: math.Float64frombits(s.rate.Load())}
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
	s.rate.Store(math.Float64bits(m.Rate))
	m.Provider, m.CrossHost = s.providersInUse()
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
		close(s.done)
		s.wg.Wait()
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
		errs = append(errs, s.also.Close())
		final := s.Counters()
		s.final.Store(&final)
		errs = append(errs, s.ring.Close())
		s.mu.Lock()
		extra := s.journalQPs
		s.journalQPs = nil
		s.mu.Unlock()
		for _, qp := range extra {
			errs = append(errs, qp.Close())
		}
		errs = append(errs, s.cq.Close())
		s.running.Unlock()
		s.closeErr = errors.Join(errs...)
		s.log.Info().Uint64("received", s.Counters().Received).Msg("subscriber: closed")
	})
	return s.closeErr
}

// drain polls until nothing arrived for DrainQuiet, at most 2 s. The quiet
// period outlasts the gap timeout, so a claimed sequence that will never be
// written is reported as a gap rather than left behind in silence.
func (s *Subscriber) drain() {
	end := time.Now().Add(2 * time.Second)
	last := time.Now()
	for now := last; now.Before(end) && now.Sub(last) < s.cfg.DrainQuiet; now = time.Now() {
		if s.reader.Poll(&s.h) > 0 {
			last = now
			continue
		}
		runtime.Gosched() // not a sleep: the reader's gap check runs every 64th empty poll
	}
}
