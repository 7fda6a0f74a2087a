package subscriber

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/membarrier"
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

// Subscriber is one topic's ring in this process and its presence on the
// bus. Poll (or Run) from one goroutine; the rest, Close included, is
// safe from any: Close stops Run, refuses later Polls and waits for the
// one under way (gate) before it drains and unmaps the ring.
type Subscriber struct {
	cfg    Config
	node   Node
	devs   *link.Devices
	dev    rdma.Device
	ring   *ring.Ring
	reader *ring.Reader
	sub    *bus.Subscription
	log    zerolog.Logger

	// Hot path: the polling goroutine.
	h   recHandler
	rec *stats.Recorder
	// gate brackets every Poll and ReadInto, so that Close, from any
	// goroutine, refuses new ones and waits for the one under way before
	// it drains and unmaps the ring (a fault otherwise): two plain stores
	// and a load per poll (membarrier.Gate).
	gate membarrier.Gate

	rep        *stats.Reporter
	joinLogged bool // stats goroutine, then Close
	stopStats  chan struct{}
	statsDone  chan struct{}

	startAt     atomic.Uint64 // the home's counter as learnStart learnt it (0: not yet)
	undelivered atomic.Uint64 // ticks the ring held past the reader after Close's drain (Counters.Undelivered)
	accepting   atomic.Int32  // learnStart calls in flight
	restartAt   atomic.Uint64 // unstick's counter (0: none)
	done        chan struct{} // closed by Close: unstick goroutines return
	wg          sync.WaitGroup
	rate        atomic.Uint64 // float64 bits: ticks/s over the last stats interval
	credits     atomic.Int32  // credit cells attached
	journalAt   atomic.Uint64 // epoch of the attached journal
	homeEpoch   atomic.Uint64 // the newest epoch whose journal is being attached (attachJournal stops retrying an older one)

	// The tail (tail.go): the newest home record (askTail asks its node
	// for the counter), and what Close named lost past the reader
	// (Counters.Tail; tailJoin while a publisher was joining: Counters.Join).
	home     atomic.Pointer[bus.HomeInfo]
	tail     atomic.Uint64
	tailJoin atomic.Uint64
	// tailEpoch: an ended epoch's unused range Close named (Counters.Epoch)
	tailEpoch atomic.Uint64
	// tailUnknown: Close learnt no bound at all (Counters.TailUnknown)
	tailUnknown atomic.Bool
	// endedAt: the reservation of an epoch that ended without a recorded
	// end (tail.go endEpochAt; 0: none); endWatch: untilEnded runs
	endedAt  atomic.Uint64
	endWatch atomic.Bool

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
	// closing is set (under mu) when Close begins, before it waits for wg:
	// spawn adds to wg only before it, so no Add races the Wait.
	closing bool

	final atomic.Pointer[Counters] // set before the ring is unmapped

	closeOnce sync.Once
	closeErr  error
}

// Node is what a subscriber needs of the bus: who this node is, its
// announcement and the publishers', the queue-pair exchange and the stats
// subject. A *bus.Node is one.
type Node interface {
	bus.Self
	bus.Announcer
	bus.ConnectService
	bus.StatsPublisher
}

// New registers a ring on the configured provider's device, announces it
// on node and starts the stats loop. h may be nil (ticks are only counted
// and timed). The node and the device set stay the caller's.
func New(ctx context.Context, node Node, devs *link.Devices, cfg Config, h Handler) (*Subscriber, error) {
	if isNil(node) || devs == nil {
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
	s.gate.Init()
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
	s.reader.AwaitEpoch() // no lap is taken before the first home record says where epochs end (onHome)
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
		// a publisher whose node the bus cannot hear, but whose queue
		// pairs are up, is held (bus.Config.UnheardHold)
		PublisherReachable: s.publisherReachable,
		OnPublisherUnheard: s.onPublisherUnheard,
		OnPublisherHeard:   s.onPublisherHeard,
		OnHome:             s.onHomeRecord,
		OnReconnect:        s.onReconnect,
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

// spawn runs f (which calls s.wg.Done) on a goroutine of its own that
// Close waits for, unless Close has begun: the bus serves connects and home
// records on its goroutines, which may still run when Close waits (a
// WaitGroup Add then races the Wait: go test -race, TestWildcard_MiddleStar).
func (s *Subscriber) spawn(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return
	}
	s.wg.Add(1)
	go f()
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

// isNil reports a missing node: nil, or a nil *bus.Node in the interface.
func isNil(node Node) bool {
	n, ok := node.(*bus.Node)
	return node == nil || ok && n == nil
}
