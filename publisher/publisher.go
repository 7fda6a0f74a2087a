package publisher

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/membarrier"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Publisher puts messages on one topic: it finds or becomes the topic's
// home, and writes every message into every subscriber's ring. One
// goroutine publishes; the rest, Close included, is safe from any: Close
// refuses later publishes and waits for the one under way (gate) before
// it unmaps what a publish writes through.
type Publisher struct {
	cfg  Config
	node Node
	devs *link.Devices
	dev  rdma.Device // Config.Provider's: the home's, if here
	log  zerolog.Logger

	// Hot path: the publishing goroutine.
	w   *ring.Writer
	buf [tick.Size]byte
	// gate brackets every publish, so that Close, from any goroutine,
	// refuses new ones and waits for the one under way before it unmaps
	// what a publish writes through (a fault otherwise): two plain stores
	// and a load per publish (membarrier.Gate).
	gate membarrier.Gate

	pub    *bus.Publication
	home   *ring.Home     // when this publisher is the topic's home
	homeQP rdma.QueuePair // the writer's QP to the home
	cq     rdma.CompletionQueue
	epoch  uint64 // the home's epoch the writer claims in (written under mu by the publishing goroutine)

	// Failover (failover.go): what earlier epochs left, closed at Close.
	retired   []func() error
	failovers []time.Duration
	homeLost  bool // guarded by mu: OnHomeLost came before the writer existed
	// lostEpoch (guarded by mu): the newest epoch of a home of ours that
	// was lost and fenced (onHomeLost); switchHome moves no writer onto it.
	lostEpoch uint64

	mu       sync.Mutex
	closed   bool
	ready    bool                 // the writer exists
	pending  []bus.SubscriberInfo // reported before the writer existed
	targets  map[string]*target   // subscriber key → target
	nextID   uint64
	homeAcc  []conn      // QPs other publishers connected to our home, and subscribers to their credit cells
	homeAlso link.AlsoOn // the home registered on other providers' devices too
	homeDesc []byte      // p.home's descriptor, as published
	fence    conn        // our own QP to p.home's counter, for fenceHome
	// fenceDesc is p.home's descriptor as fence's peer granted it: the
	// counter word, atomics only (its rkey a memory window's on verbs).
	fenceDesc ring.HomeDesc
	dropped   map[uint64]bool
	// end is the counter our home ended at, fenced by Close (0: not
	// fenced, or not home): the bus writes it into the home record
	// (bus.PublishSpec.EndCounter).
	end atomic.Uint64
	// unheardDrops counts subscribers dropped after the bus held them
	// while their node was unheard on NATS (onSubscriberGone).
	unheardDrops atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// Node is what a publisher needs of the bus: who this node is, the topic's
// home election, the queue-pair exchange and the authorization its home's
// accept handler checks. A *bus.Node is one.
type Node interface {
	bus.Self
	bus.HomeElector
	bus.ConnectService
	bus.Authorizer
}

// New makes a publisher of cfg.Topic on node: it finds the topic's home or
// becomes it (ctx bounds that), connects a queue pair to it, makes the
// writer, and from then on connects to every subscriber, present and
// future, and drops those that go. The node and the device set stay the
// caller's.
func New(ctx context.Context, node Node, devs *link.Devices, cfg Config) (*Publisher, error) {
	if isNil(node) || devs == nil {
		return nil, fmt.Errorf("%w: node and devices are required", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if cfg.ID == "" {
		cfg.ID = node.ID()
	}
	dev, err := devs.Get(cfg.Provider)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, node: node, devs: devs, dev: dev, targets: map[string]*target{}, dropped: map[uint64]bool{},
		log: cfg.Logger.With().Str("topic", cfg.Topic).Str("publisher", cfg.ID).Logger()}
	p.gate.Init()
	var data [4]byte
	binary.LittleEndian.PutUint32(data[:], cfg.PublisherID)
	p.pub, err = node.Publish(ctx, bus.PublishSpec{
		Topic: cfg.Topic, ID: cfg.ID, Data: data[:], // subscribers learn the id stamped on our ticks
		NewHome:            p.newHome,
		HomeCounter:        p.homeCounter,
		EndCounter:         p.end.Load,
		AcceptHome:         p.acceptHome,
		Accept:             p.acceptCredit,
		OnHome:             p.onHome,
		ValidateSubscriber: validateSubscriber,
		OnSubscriber:       p.onSubscriber,
		OnSubscriberGone:   p.onSubscriberGone,
		// a subscriber whose node the bus cannot hear, but whose queue
		// pair is up, is held (bus.Config.UnheardHold)
		SubscriberReachable: p.subscriberReachable,
		OnSubscriberUnheard: p.onSubscriberUnheard,
		OnSubscriberHeard:   p.onSubscriberHeard,
		OnHomeLost:          p.onHomeLost,
		OnLease:             p.onLease,
	})
	if err != nil {
		_ = p.homeAlso.Close()
		if p.home != nil {
			_ = p.home.Close()
		}
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if err := p.connectHome(ctx); err != nil {
		_ = p.Close()
		return nil, err
	}
	p.mu.Lock()
	p.ready = true
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, s := range pending {
		p.onSubscriber(s)
	}
	p.log.Info().Bool("home", p.pub.IsHome()).Uint32("id", cfg.PublisherID).Msg("publisher: up")
	return p, nil
}

func validateSubscriber(s bus.SubscriberInfo) error {
	var d ring.RingDesc
	return d.UnmarshalBinary(s.Ring)
}

// IsHome reports whether the topic's home is this publisher.
func (p *Publisher) IsHome() bool { return p.pub.IsHome() }

// MaxPayload is the largest message the topic's slots carry.
func (p *Publisher) MaxPayload() int {
	var hd ring.HomeDesc
	if err := hd.UnmarshalBinary(p.pub.Home().Descriptor); err != nil {
		return 0
	}
	return hd.MaxPayload()
}

// Stats are the writer's counters.
func (p *Publisher) Stats() ring.WriterStats { return p.writer().Stats() }

// isNil reports a missing node: nil, or a nil *bus.Node in the interface.
func isNil(node Node) bool {
	n, ok := node.(*bus.Node)
	return node == nil || ok && n == nil
}
