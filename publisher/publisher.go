package publisher

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrClosed: the publisher was closed.
	ErrClosed = errors.New("publisher: closed")
	// ErrTooLarge: a message larger than the topic's slot payload. Nothing
	// was published.
	ErrTooLarge = errors.New("publisher: message larger than the slot payload")
	// ErrMixedProviders: a publisher asked to claim on this home over a
	// provider that cannot share the counter with the home's own (verbs
	// atomics are atomic only among themselves).
	ErrMixedProviders = errors.New("publisher: providers cannot be mixed on this home")
	// ErrNoHome: the topic's home went away and no successor was reachable
	// within Config.FailoverTimeout. Nothing was published. Retryable: the
	// next publish tries again (see failover.go).
	ErrNoHome = errors.New("publisher: no home for the topic (failover in progress); retry")
)

// DefaultJournalSlots is the home's journal when Config.JournalSlots is 0.
const DefaultJournalSlots = 4096

// Config configures a Publisher.
type Config struct {
	// Topic to publish on (one NATS subject token). Required.
	Topic string
	// ID names the publisher among the topic's publishers on its node;
	// default the node id.
	ID string
	// PublisherID is stamped on every tick; default random non-zero.
	PublisherID uint32
	// Provider is the device the topic's home is allocated on if this
	// publisher becomes it, and the one its own claims use (a loopback
	// queue pair): "shm" (default) or "tcp". Every other queue pair uses
	// the provider the bus picks for its peer (Node.ProviderFor: shm on
	// this host, tcp across hosts, or the node's override), and the home is
	// registered on that provider's device too when a peer claims through
	// it.
	Provider string
	// SlotSize bounds every message of the topic if this publisher becomes
	// its home (default 128: a tick and room to spare); JournalSlots is the
	// home's journal, which subscribers attach to recover losses (a power
	// of two; default DefaultJournalSlots; -1: none).
	SlotSize     int
	JournalSlots int
	// Claim is ring.ClaimCAS (default) or ring.ClaimFAA.
	Claim ring.ClaimMode
	// MaxBatch bounds PublishBatch (default 64).
	MaxBatch int
	// Timeout bounds each wait of the writer (default 1s).
	Timeout time.Duration
	// Idle is what the writer does while it waits (default rdma.Yield{}).
	Idle rdma.IdleStrategy
	// ArbitrationWindow is how long PublishAt waits for the other line of
	// an A/B pair to fill the sequences before one it is ahead at, before
	// declaring them missing (default 1ms; see ring.WriterConfig).
	ArbitrationWindow time.Duration
	// ConnectTimeout bounds connecting to a subscriber or the home
	// (default 5s).
	ConnectTimeout time.Duration
	// FailoverTimeout bounds how long one publish waits for the topic's
	// next home when the current one went away (default 3s); then it
	// returns ErrNoHome.
	FailoverTimeout time.Duration
	Logger          zerolog.Logger
}

func (c *Config) setDefaults() error {
	if c.Provider == "" {
		c.Provider = rdma.ProviderShm
	}
	if c.SlotSize == 0 {
		c.SlotSize = 128
	}
	switch c.JournalSlots {
	case 0:
		c.JournalSlots = DefaultJournalSlots
	case -1:
		c.JournalSlots = 0
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 64
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.FailoverTimeout == 0 {
		c.FailoverTimeout = 3 * time.Second
	}
	for c.PublisherID == 0 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.PublisherID = binary.LittleEndian.Uint32(b[:])
	}
	switch {
	case c.Topic == "":
		return fmt.Errorf("%w: Topic is empty", ErrInvalidConfig)
	case c.Provider != rdma.ProviderShm && c.Provider != rdma.ProviderTCP:
		return fmt.Errorf("%w: Provider %q, want shm or tcp", ErrInvalidConfig, c.Provider)
	case c.SlotSize-ring.SlotHeaderSize < tick.Size:
		return fmt.Errorf("%w: SlotSize %d leaves no room for a %d-byte tick after the %d-byte header", ErrInvalidConfig, c.SlotSize, tick.Size, ring.SlotHeaderSize)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("%w: ConnectTimeout %v, want > 0", ErrInvalidConfig, c.ConnectTimeout)
	case c.FailoverTimeout < 0:
		return fmt.Errorf("%w: FailoverTimeout %v, want > 0", ErrInvalidConfig, c.FailoverTimeout)
	}
	return nil
}

// Publisher puts messages on one topic: it finds or becomes the topic's
// home, and writes every message into every subscriber's ring. One
// goroutine publishes; the rest is safe from any.
type Publisher struct {
	cfg  Config
	node *bus.Node
	devs *link.Devices
	dev  rdma.Device // Config.Provider's: the home's, if here
	log  zerolog.Logger

	// Hot path: the publishing goroutine.
	w   *ring.Writer
	buf [tick.Size]byte

	pub    *bus.Publication
	home   *ring.Home     // when this publisher is the topic's home
	homeQP rdma.QueuePair // the writer's QP to the home
	cq     rdma.CompletionQueue
	epoch  uint64 // the home's epoch the writer claims in (written under mu by the publishing goroutine)

	// Failover (failover.go): what earlier epochs left, closed at Close.
	retired   []func() error
	failovers []time.Duration
	homeLost  bool // guarded by mu: OnHomeLost came before the writer existed

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
	dropped  map[uint64]bool

	closeOnce sync.Once
	closeErr  error
}

type target struct {
	id   uint64
	info bus.SubscriberInfo
	conn conn
	rt   ring.Target // as added to the writer: moved to the next one at a failover
	// credit is the CreditDesc of the ring's credit cell at the writer
	// (reliable rings), for the subscriber's connect (acceptCredit).
	credit []byte
}

type conn struct {
	qp rdma.QueuePair
	cq rdma.CompletionQueue
}

func (c conn) close() error {
	var errs []error
	if c.qp != nil {
		errs = append(errs, c.qp.Close())
	}
	if c.cq != nil {
		errs = append(errs, c.cq.Close())
	}
	return errors.Join(errs...)
}

// New makes a publisher of cfg.Topic on node: it finds the topic's home or
// becomes it (ctx bounds that), connects a queue pair to it, makes the
// writer, and from then on connects to every subscriber, present and
// future, and drops those that go. The node and the device set stay the
// caller's.
func New(ctx context.Context, node *bus.Node, devs *link.Devices, cfg Config) (*Publisher, error) {
	if node == nil || devs == nil {
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
	var data [4]byte
	binary.LittleEndian.PutUint32(data[:], cfg.PublisherID)
	p.pub, err = node.Publish(ctx, bus.PublishSpec{
		Topic: cfg.Topic, ID: cfg.ID, Data: data[:], // subscribers learn the id stamped on our ticks
		NewHome:            p.newHome,
		HomeCounter:        p.homeCounter,
		AcceptHome:         p.acceptHome,
		Accept:             p.acceptCredit,
		OnHome:             p.onHome,
		ValidateSubscriber: validateSubscriber,
		OnSubscriber:       p.onSubscriber,
		OnSubscriberGone:   p.onSubscriberGone,
		OnHomeLost:         p.onHomeLost,
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

// newHome makes the topic's sequencer here, its counter at start (above
// every sequence an earlier home handed out). A home of an earlier epoch
// held here is retired: closed at Close.
func (p *Publisher) newHome(ctx context.Context, topic string, start uint64) ([]byte, error) {
	h, err := ring.NewHome(p.dev, ring.HomeConfig{JournalSlots: p.cfg.JournalSlots, SlotSize: p.cfg.SlotSize, Start: start, Logger: p.cfg.Logger})
	if err != nil {
		return nil, err
	}
	desc, err := h.Desc().MarshalBinary()
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	// A queue pair of our own to the counter, to fence it (FenceCounter)
	// when the lease is lost: any goroutine but the publishing one.
	fence, peer, err := p.loopback(ctx)
	if err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("publisher: the home's fence queue pair: %w", err)
	}
	p.mu.Lock()
	if old := p.home; old != nil {
		p.retired = append(p.retired, old.Close)
	}
	// The old home's registrations on other devices describe the old
	// home: a claimant over tcp must get this one's (i9t: the chaos test
	// found New failing with "another home's descriptor").
	p.retired = append(p.retired, p.homeAlso.Forget()...)
	p.retired = append(p.retired, p.fence.close)
	p.home, p.homeDesc, p.fence = h, desc, fence
	p.homeAcc = append(p.homeAcc, peer)
	p.mu.Unlock()
	p.log.Info().Uint64("start", start).Msg("publisher: this node is the topic's home")
	return desc, nil
}

// loopback connects two fresh queue pairs on the home's device to each
// other.
func (p *Publisher) loopback(ctx context.Context) (conn, conn, error) {
	a, err := newConn(p.dev)
	if err != nil {
		return conn{}, conn{}, err
	}
	b, err := newConn(p.dev)
	if err != nil {
		_ = a.close()
		return conn{}, conn{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- b.qp.Connect(cctx, a.qp.LocalEndpoint()) }()
	err = a.qp.Connect(cctx, b.qp.LocalEndpoint())
	if berr := <-errc; err == nil {
		err = berr
	}
	if err != nil {
		_ = a.close()
		_ = b.close()
		return conn{}, conn{}, err
	}
	return a, b, nil
}

// fenceHome stops our home (if desc is it) from granting claims: every
// later claim, remote ones included, is refused by its writer's limit
// check. Called when the lease is lost, before it can expire, and at Close.
func (p *Publisher) fenceHome(desc []byte) {
	p.mu.Lock()
	h, fence := p.home, p.fence
	mine := h != nil && fence.qp != nil && bytes.Equal(desc, p.homeDesc)
	p.mu.Unlock()
	if !mine {
		return
	}
	before, err := ring.FenceCounter(p.dev, fence.qp, fence.cq, h.Desc(), time.Second)
	if err != nil {
		p.log.Warn().Err(err).Msg("publisher: could not fence the home's counter; claimants stop at its reservation")
		return
	}
	p.log.Info().Uint64("counter", before).Msg("publisher: fenced the home's counter")
}

// acceptHome serves another publisher's connect to our home.
func (p *Publisher) acceptHome(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	dev, mr, desc, err := p.homeDeviceFor(req.Endpoint.Provider)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	c, err := newConn(dev)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	// the peer reaches the home's region only: all of it for a publisher
	// (claims and journal writes), reads for anyone else (a subscriber)
	access := rdma.AccessRemoteRead
	if p.node.Authorization().CanPublish(req.From.Key, p.cfg.Topic) {
		access = rdma.AccessRemote
	}
	if err := ring.Grant(c.qp, mr, access); err != nil {
		_ = c.close()
		return bus.ConnectReply{}, err
	}
	if err := c.qp.Connect(ctx, req.Endpoint); err != nil {
		_ = c.close()
		return bus.ConnectReply{}, err
	}
	p.mu.Lock()
	if p.closed || p.home == nil {
		p.mu.Unlock()
		_ = c.close()
		return bus.ConnectReply{}, ErrClosed
	}
	p.homeAcc = append(p.homeAcc, c)
	// The counter as read now: a subscriber joining a running topic starts
	// its ring here (ring.Reader.StartAt).
	var counter [8]byte
	binary.LittleEndian.PutUint64(counter[:], p.home.Counter())
	p.mu.Unlock()
	p.log.Info().Str("peer", req.From.ID).Str("peer_host", req.From.HostID).Str("provider", dev.Provider()).Msg("publisher: connected to the home")
	return bus.ConnectReply{Endpoint: c.qp.LocalEndpoint(), Region: desc, Data: counter[:]}, nil
}

// newConn makes a confined queue pair: its peer reaches only what is
// granted to it (the home's region, a reliable subscriber's credit cells),
// or nothing.
func newConn(dev rdma.Device) (conn, error) {
	c, err := link.OpenConfined(dev, link.Writer)
	return conn{qp: c.QP, cq: c.CQ}, err
}

// newOpenConn makes a queue pair whose peer reaches every remote region of
// dev: only for a loopback pair within this process.
func newOpenConn(dev rdma.Device) (conn, error) {
	c, err := link.Open(dev, link.Writer)
	return conn{qp: c.QP, cq: c.CQ}, err
}

// connectHome connects the writer's QP to the home (a loopback pair when
// the home is here) and makes the writer.
//
// The home the bus named may be gone by the time we dial it (it lost its
// lease, was killed, or its record outlived it after a server restart:
// "node X has no home"), so a failed dial asks the bus for the current
// home again, as failover does, for up to ConnectTimeout+FailoverTimeout
// (and ctx).
func (p *Publisher) connectHome(ctx context.Context) error {
	hi := p.pub.Home()
	deadline := time.Now().Add(p.cfg.ConnectTimeout + p.cfg.FailoverTimeout)
	var w *ring.Writer
	for {
		timeout := min(p.cfg.ConnectTimeout, max(time.Until(deadline), 100*time.Millisecond))
		var qp rdma.QueuePair
		var cq rdma.CompletionQueue
		var err error
		w, qp, cq, err = p.dialHome(ctx, hi, timeout)
		if err == nil {
			p.cq, p.homeQP = cq, qp
			break
		}
		if qp != nil {
			_ = qp.Close()
		}
		if cq != nil {
			_ = cq.Close()
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		p.log.Info().Err(err).Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Msg("publisher: the home named is not reachable; asking for the current one")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		nhi, rerr := p.pub.Rehome(rctx)
		cancel()
		if errors.Is(rerr, bus.ErrClosed) {
			return err
		}
		if rerr == nil {
			hi = nhi
		}
	}
	p.mu.Lock()
	p.w, p.epoch = w, hi.Epoch
	if hi.Reserved != 0 {
		w.SetLimit(hi.Reserved)
	}
	if p.homeLost {
		w.SetLimit(0) // the home went while we connected: the first publish fails over
	}
	p.mu.Unlock()
	return nil
}

// dialHome connects a new QP to the home hi and makes a writer on it. On
// error the QP and CQ made so far are returned for the caller to close.
func (p *Publisher) dialHome(ctx context.Context, hi bus.HomeInfo, timeout time.Duration) (w *ring.Writer, qp rdma.QueuePair, cq rdma.CompletionQueue, err error) {
	var hd ring.HomeDesc
	if err := hd.UnmarshalBinary(hi.Descriptor); err != nil {
		return nil, qp, cq, fmt.Errorf("publisher: home descriptor from %s: %w", hi.Node.ID, err)
	}
	dev := p.dev // a home here: a loopback pair on its own device
	if !hi.Local {
		d, err := p.devs.Get(p.node.ProviderFor(hi.Node))
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: the home on %s: %w", hi.Node.ID, err)
		}
		dev = d
	}
	hc, err := link.OpenConfined(dev, link.Writer) // the home reaches nothing here
	if err != nil {
		return nil, nil, nil, fmt.Errorf("publisher: %w", err)
	}
	cq, qp = hc.CQ, hc.QP
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if hi.Local {
		// the home's side of a loopback pair: its peer is our own writer
		// (the home may be another Publisher's of this node), so it is not
		// confined
		peer, err := newOpenConn(dev)
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: %w", err)
		}
		p.mu.Lock()
		p.homeAcc = append(p.homeAcc, peer)
		p.mu.Unlock()
		errc := make(chan error, 1)
		go func() { errc <- peer.qp.Connect(cctx, qp.LocalEndpoint()) }()
		if err := qp.Connect(cctx, peer.qp.LocalEndpoint()); err != nil {
			<-errc
			return nil, qp, cq, fmt.Errorf("publisher: loopback to the home: %w", err)
		}
		if err := <-errc; err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: loopback to the home: %w", err)
		}
	} else {
		rep, err := p.node.Connect(cctx, hi.Node.ID, bus.ConnectRequest{Topic: p.cfg.Topic, Kind: bus.TargetHome, Endpoint: qp.LocalEndpoint()})
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: connect to the home on %s: %w", hi.Node.ID, err)
		}
		if err := qp.Connect(cctx, rep.Endpoint); err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: connect to the home on %s: %w", hi.Node.ID, err)
		}
		// The home's region as registered on this provider's device.
		var rd ring.HomeDesc
		if err := rd.UnmarshalBinary(rep.Region); err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: home descriptor in the connect reply from %s: %w", hi.Node.ID, err)
		}
		if rd.Epoch != hd.Epoch || rd.SlotSize != hd.SlotSize || rd.JournalSlots != hd.JournalSlots {
			return nil, qp, cq, fmt.Errorf("publisher: the home on %s answered with another home's descriptor", hi.Node.ID)
		}
		hd = rd
	}
	p.log.Info().Str("home", hi.Node.ID).Str("home_host", hi.Node.HostID).Bool("local", hi.Local).Str("provider", dev.Provider()).
		Msg("publisher: claims go to the home")
	w, err = ring.NewWriter(ring.WriterConfig{Device: dev, CQ: cq, HomeQP: qp, Home: hd, PublisherID: p.cfg.PublisherID,
		Claim: p.cfg.Claim, MaxBatch: p.cfg.MaxBatch, Timeout: p.cfg.Timeout, Idle: p.cfg.Idle,
		ArbitrationWindow: p.cfg.ArbitrationWindow, OnTargetDropped: p.onTargetDropped, Logger: p.cfg.Logger})
	if err != nil {
		return nil, qp, cq, fmt.Errorf("publisher: %w", err)
	}
	return w, qp, cq, nil
}

// onTargetDropped runs on the publishing goroutine when a subscriber's QP
// failed: note it, and reconnect on another goroutine while the bus still
// lists the subscriber. One log line per dropped target, never per tick.
func (p *Publisher) onTargetDropped(id uint64, err error) {
	p.mu.Lock()
	p.dropped[id] = true
	var t *target
	for _, x := range p.targets {
		if x.id == id {
			t = x
			break
		}
	}
	closed := p.closed
	p.mu.Unlock()
	p.log.Warn().Uint64("target", id).Err(err).Msg("publisher: subscriber's queue pair failed; dropped it")
	if t != nil && !closed {
		go p.reconnect(t)
	}
}

// reconnect replaces a target whose QP failed while its subscriber is still
// on the bus: a link that was down for less than the heartbeat timeout
// leaves the bus's view unchanged, so without this the subscriber would
// never hear from this publisher again, and would not know it. With a new
// QP the writes resume at the current sequence and the subscriber's reader
// reports the sequences it missed as gaps or overruns. The failed target
// stays in p.targets until it is replaced, so a subscriber that left in
// the meantime is still dropped (and logged) once by onSubscriberGone,
// which also ends this loop.
func (p *Publisher) reconnect(t *target) {
	key := t.info.Key()
	if err := p.writer().RemoveTarget(t.id); err != nil && !errors.Is(err, ring.ErrNoTarget) {
		p.log.Warn().Err(err).Uint64("target", t.id).Msg("publisher: remove failed target")
	}
	_ = t.conn.close()
	p.log.Info().Str("subscriber", key).Msg("publisher: reconnecting to a subscriber still on the bus")
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		current := !p.closed && p.targets[key] == t
		p.nextID++
		id := p.nextID
		p.mu.Unlock()
		if !current || !p.stillSubscribed(t.info) {
			return // gone, replaced, or the publisher closed
		}
		err := p.addTarget(id, t.info)
		if err == nil || errors.Is(err, ErrClosed) {
			return
		}
		p.log.Debug().Str("subscriber", key).Err(err).Msg("publisher: reconnect failed; retrying")
		time.Sleep(link.Reconnect.Delay(attempt))
	}
}

// onSubscriber connects to a subscriber's ring and adds it to the writer.
func (p *Publisher) onSubscriber(s bus.SubscriberInfo) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	if !p.ready {
		p.pending = append(p.pending, s)
		p.mu.Unlock()
		return
	}
	p.nextID++
	id := p.nextID
	p.mu.Unlock()
	// A connect can fail on a busy host (timeouts) or while the subscriber
	// is still starting: retry a few times, then say so once.
	var err error
	for attempt := 1; link.Connect.More(attempt); attempt++ {
		if err = p.addTarget(id, s); err == nil || errors.Is(err, ErrClosed) || !p.stillSubscribed(s) {
			return
		}
		p.log.Debug().Str("subscriber", s.Key()).Int("attempt", attempt).Err(err).Msg("publisher: connect to subscriber failed; retrying")
		time.Sleep(link.Connect.Delay(attempt))
	}
	p.log.Warn().Str("subscriber", s.Key()).Err(err).Msg("publisher: cannot reach subscriber; it gets nothing from this publisher")
}

// stillSubscribed reports whether the bus still lists s for the topic.
func (p *Publisher) stillSubscribed(s bus.SubscriberInfo) bool {
	for _, x := range p.pub.Subscribers() {
		if x.Key() == s.Key() {
			return true
		}
	}
	return false
}

func (p *Publisher) addTarget(id uint64, s bus.SubscriberInfo) error {
	prov := p.node.ProviderFor(s.Node)
	dev, err := p.devs.Get(prov)
	if err != nil {
		return err
	}
	c, err := newConn(dev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	rep, err := p.node.Connect(ctx, s.Node.ID, bus.ConnectRequest{Topic: p.cfg.Topic, Kind: bus.TargetSubscriber, ID: s.ID, Endpoint: c.qp.LocalEndpoint(),
		Data: []byte(p.cfg.ID)}) // our id: a reliable subscriber connects back to its credit cell
	if err != nil {
		_ = c.close()
		return err
	}
	if err := c.qp.Connect(ctx, rep.Endpoint); err != nil {
		_ = c.close()
		return err
	}
	var rd ring.RingDesc
	if err := rd.UnmarshalBinary(rep.Region); err != nil {
		_ = c.close()
		return fmt.Errorf("ring descriptor in the connect reply: %w", err)
	}
	rt := ring.Target{ID: id, QP: c.qp, Device: dev, CQ: c.cq, Ring: rd}
	// Under mu: a failover moves p.targets to its new writer under mu too.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.close()
		return ErrClosed
	}
	cd, err := p.w.AddTarget(rt)
	if err != nil {
		p.mu.Unlock()
		_ = c.close()
		return err
	}
	nt := &target{id: id, info: s, conn: c, rt: rt}
	if rd.Mode == ring.Reliable {
		nt.credit, _ = cd.MarshalBinary()
	}
	old := p.targets[s.Key()]
	p.targets[s.Key()] = nt
	if old != nil { // a reconnect and a fresh announcement raced: keep the newer QP
		_ = p.w.RemoveTarget(old.id)
	}
	p.mu.Unlock()
	if old != nil {
		_ = old.conn.close()
	}
	p.log.Info().Str("subscriber", s.Key()).Str("subscriber_host", s.Node.HostID).Str("provider", prov).Uint64("target", id).
		Msg("publisher: subscriber connected")
	return nil
}

// onSubscriberGone removes a subscriber that withdrew, left or timed out.
func (p *Publisher) onSubscriberGone(s bus.SubscriberInfo, reason error) {
	p.mu.Lock()
	t := p.targets[s.Key()]
	delete(p.targets, s.Key())
	p.mu.Unlock()
	if t == nil {
		return
	}
	if err := p.writer().RemoveTarget(t.id); err != nil && !errors.Is(err, ring.ErrNoTarget) {
		p.log.Warn().Err(err).Uint64("target", t.id).Msg("publisher: remove target")
	}
	_ = t.conn.close()
	p.log.Info().Str("subscriber", s.Key()).Err(reason).Msg("publisher: subscriber gone; dropped its queue pair")
}

// Subscribers is how many subscriber rings the writer writes into now.
func (p *Publisher) Subscribers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.targets)
}

// WaitSubscribers waits until at least n subscribers are connected, or ctx
// ends.
func (p *Publisher) WaitSubscribers(ctx context.Context, n int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for p.Subscribers() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("publisher: %d of %d subscribers connected: %w", p.Subscribers(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
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

// Publish claims the next sequence and writes one message of type typ
// into every subscriber's ring. publishNs is the time latency is measured
// from (time.Now().UnixNano(), or a paced feed's intended send time). It
// returns the sequence. It allocates nothing, takes no lock, makes no
// syscall on shm. Errors are ring's sentinels (ErrTooLarge for an
// oversize payload).
func (p *Publisher) Publish(typ uint16, payload []byte, publishNs int64) (uint64, error) {
	seq, err := p.w.Publish(typ, payload, publishNs)
	if err != nil && p.failover(err) {
		seq, err = p.w.Publish(typ, payload, publishNs)
	}
	if err != nil {
		return seq, p.publishErr(err)
	}
	return seq, nil
}

// PublishTick encodes t (its PubTime is the publish time) and publishes it.
func (p *Publisher) PublishTick(t *tick.Tick) (uint64, error) {
	if _, err := tick.Encode(p.buf[:], t); err != nil {
		return 0, err
	}
	return p.Publish(tick.MessageType, p.buf[:], t.PubTime)
}

// PublishBatch claims len(msgs) consecutive sequences at once and writes
// them in order (Seq and Publisher of each are ignored); it returns the
// first sequence.
func (p *Publisher) PublishBatch(msgs []ring.Tick) (uint64, error) {
	seq, err := p.w.PublishBatch(msgs)
	if err != nil && p.failover(err) {
		seq, err = p.w.PublishBatch(msgs)
	}
	if err != nil {
		return seq, p.publishErr(err)
	}
	return seq, nil
}

// PublishAt publishes at exactly sequence seq: with two redundant feed
// lines publishing the same sequences, the first wins and the other gets
// ring.ErrLost (drop the copy).
func (p *Publisher) PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error) {
	got, err := p.w.PublishAt(seq, typ, payload, publishNs)
	if err != nil && p.failover(err) {
		got, err = p.w.PublishAt(seq, typ, payload, publishNs)
	}
	if err != nil {
		return got, p.publishErr(err)
	}
	return got, nil
}

// Stats are the writer's counters.
func (p *Publisher) Stats() ring.WriterStats { return p.writer().Stats() }

// Close waits (up to the writer's timeout) for every posted write to land,
// withdraws the publisher (if it is the topic's home, the home goes with
// it), stops the writer and closes every queue pair. Do not call it while a
// publish runs. Idempotent.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		var errs []error
		// Wait for what was posted to land before the QPs and the staging
		// memory go: over tcp a backlog can take longer than the provider's
		// linger, and the subscriber could not tell those ticks were lost.
		if p.w != nil {
			if err := p.w.Flush(); err != nil && !errors.Is(err, ring.ErrClosed) {
				p.log.Warn().Err(err).Msg("publisher: flush before close: the last ticks may not have reached every subscriber")
				errs = append(errs, fmt.Errorf("publisher: flush before close: %w", err))
			}
		}
		p.mu.Lock()
		desc := p.homeDesc
		p.mu.Unlock()
		p.fenceHome(desc) // claims still racing to our counter are refused, not lost
		errs = append(errs, p.pub.Close())
		p.mu.Lock()
		targets := p.targets
		p.targets = map[string]*target{}
		acc := p.homeAcc
		p.homeAcc = nil
		home := p.home
		p.mu.Unlock()
		if p.w != nil {
			errs = append(errs, p.w.Close())
		}
		p.mu.Lock()
		retired := p.retired
		p.retired = nil
		p.mu.Unlock()
		for _, f := range retired {
			errs = append(errs, f())
		}
		for _, t := range targets {
			errs = append(errs, t.conn.close())
		}
		if p.homeQP != nil {
			errs = append(errs, p.homeQP.Close())
		}
		for _, c := range acc {
			errs = append(errs, c.close())
		}
		p.mu.Lock()
		fence := p.fence
		p.fence = conn{}
		p.mu.Unlock()
		errs = append(errs, fence.close())
		if p.cq != nil {
			errs = append(errs, p.cq.Close())
		}
		errs = append(errs, p.homeAlso.Close())
		if home != nil {
			errs = append(errs, home.Close())
		}
		p.closeErr = errors.Join(errs...)
		p.log.Info().Msg("publisher: closed")
	})
	return p.closeErr
}
