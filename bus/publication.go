package bus

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// PublishSpec says what a publisher of a topic needs from the bus. The
// callbacks run one at a time, in order, on the publication's own goroutine;
// they may call the bus (Connect, Close) but should not block for long.
type PublishSpec struct {
	Topic string
	// ID names this publisher among the topic's publishers on this node;
	// default the node id.
	ID string
	// Data is announced with the publisher (opaque; for example the
	// descriptor of its credit cells for reliable subscribers).
	Data []byte
	// NewHome is called when this node becomes the topic's home: it makes
	// the sequencer counter and journal and returns their descriptor
	// (opaque bytes that every other publisher of the topic receives in
	// HomeInfo). Required unless Config.Homes names another node.
	// start is the first sequence the counter hands out: above every
	// sequence an earlier home of the topic could have handed out.
	NewHome func(ctx context.Context, topic string, start uint64) ([]byte, error)
	// HomeCounter, with NewHome, reads the home's counter (the next
	// sequence to claim), so the bus can extend the reservation before the
	// counter reaches it. Without it the home never extends its first
	// reservation (Config.ReserveChunk sequences).
	HomeCounter func() uint64
	// EndCounter, with NewHome, is the counter the home ended at when the
	// publication closes (after the home stopped granting claims), or 0 if
	// unknown: the bus writes it into the home record (HomeInfo.End), so
	// subscribers can name the sequences they never received. Optional.
	EndCounter func() uint64
	// AcceptHome serves connects to the home (TargetHome) while this
	// publication is the home. Required with NewHome.
	AcceptHome AcceptFunc
	// Accept serves connects to this publisher (TargetPublisher), for
	// example reliable subscribers reaching its credit cells. Optional.
	Accept AcceptFunc
	// ValidateSubscriber, if set, checks each announced subscriber (for
	// example that its ring descriptor parses). A subscriber it rejects is
	// logged (rate-limited), counted as ignored and never reported.
	ValidateSubscriber func(SubscriberInfo) error
	// OnSubscriber is called once for every subscriber of the topic, those
	// already known when Publish returns and those that join later (this
	// node's included).
	OnSubscriber func(SubscriberInfo)
	// OnSubscriberGone is called once when a reported subscriber withdraws
	// (ErrWithdrawn), its node says goodbye (ErrPeerLeft), times out
	// (ErrPeerLost; if held, when the hold ends: see SubscriberReachable)
	// or restarts (ErrPeerRestarted): drop its queue pair.
	OnSubscriberGone func(SubscriberInfo, error)
	// SubscriberReachable reports whether the data plane to s is up (its
	// queue pair connected and not failed). With it, a subscriber whose
	// node the bus lost by heartbeat (ErrPeerLost) while it is reachable is
	// held, not gone (see unheard.go and Config.UnheardHold): the bus
	// calls OnSubscriberUnheard, then either OnSubscriberHeard when its
	// node re-announces it unchanged, or OnSubscriberGone once the check
	// fails (ErrHoldFailed), the hold ends (ErrHoldEnded), or it leaves,
	// restarts or withdraws. It runs on the publication's goroutine, once
	// at the loss and every 50 ms while held: keep it short. Optional:
	// without it a lost subscriber is gone at once.
	SubscriberReachable func(SubscriberInfo) bool
	// OnSubscriberUnheard is called when a subscriber starts to be held
	// (hold: Config.UnheardHold); OnSubscriberHeard when it is held no
	// longer because its node re-announced it (unheard: for how long).
	// Both optional.
	OnSubscriberUnheard func(s SubscriberInfo, hold time.Duration)
	OnSubscriberHeard   func(s SubscriberInfo, unheard time.Duration)
	// OnHomeLost is called once per home when the topic's home goes away
	// (its lease was deleted or expired, a newer epoch superseded it, its
	// node left, or this node lost it); the error wraps ErrHomeLost. Call
	// Rehome to find or become the next home.
	OnHomeLost func(HomeInfo, error)
	// OnHome is called with every new home record of the topic: a new
	// reservation (HomeInfo.Reserved) in the current epoch, or a new epoch.
	OnHome func(HomeInfo)
	// OnLease is called, on the lease loop's goroutine (keep it short),
	// each time this node takes or renews the topic's lease while this
	// publication is the home: end is when the home gives itself up
	// unless it renews again (Publication.LeaseEnd). Optional.
	OnLease func(epoch uint64, end time.Time)
}

// Publication is this node publishing one topic.
type Publication struct {
	n    *Node
	spec PublishSpec
	q    *eventQueue

	mu      sync.Mutex
	home    HomeInfo
	homeErr error
	subs    map[string]SubscriberInfo // reported to OnSubscriber and not gone (nor held)
	held    *holds[SubscriberInfo]    // lost by heartbeat, still reachable (unheard.go); on q only
	closed  bool                      // guarded by n.mu

	leaseEpoch uint64    // the epoch of the last home this publication held (lease.go)
	leaseEnd   time.Time // and when its lease loop gives it up unless renewed
}

// Publish makes this node a publisher of spec.Topic: it finds the topic's
// home, or becomes it (see doc.go for how the home is decided), announces
// the publisher and reports every subscriber, now and later. ctx bounds the
// home lookup and claim.
func (n *Node) Publish(ctx context.Context, spec PublishSpec) (*Publication, error) {
	if spec.ID == "" {
		spec.ID = n.self.ID
	}
	if err := checkTopic("PublishSpec.Topic", spec.Topic); err != nil {
		return nil, err
	}
	if err := checkToken("PublishSpec.ID", spec.ID); err != nil {
		return nil, err
	}
	if len(spec.Data) > maxBlob {
		return nil, fmt.Errorf("%w: PublishSpec.Data of %d bytes, want at most %d", ErrInvalidConfig, len(spec.Data), maxBlob)
	}
	if (spec.NewHome == nil) != (spec.AcceptHome == nil) {
		return nil, fmt.Errorf("%w: PublishSpec.NewHome and AcceptHome: want both or neither", ErrInvalidConfig)
	}
	key := spec.Topic + "/" + spec.ID
	n.mu.Lock()
	if err := n.checkOpen(); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if n.localPubs[spec.Topic][spec.ID] != nil || n.pending[key] {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: publisher %q of topic %q", ErrDuplicate, spec.ID, spec.Topic)
	}
	n.pending[key] = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.pending, key)
		n.mu.Unlock()
	}()

	p := &Publication{n: n, spec: spec, subs: map[string]SubscriberInfo{}}
	home, err := n.resolveHome(ctx, p)
	if err != nil {
		return nil, err
	}
	p.home = home
	p.q = newEventQueue()
	p.held = newHolds(p.q, n.cfg.UnheardHold, sameSub, spec.SubscriberReachable, spec.OnSubscriberUnheard, spec.OnSubscriberHeard,
		func(s SubscriberInfo, reason error) {
			if f := p.spec.OnSubscriberGone; f != nil {
				f(s, reason)
			}
		})

	n.mu.Lock()
	if err := n.checkOpen(); err != nil {
		n.mu.Unlock()
		p.q.close()
		n.dropHome(p)
		return nil, err
	}
	if n.localPubs[spec.Topic] == nil {
		n.localPubs[spec.Topic] = map[string]*Publication{}
	}
	n.localPubs[spec.Topic][spec.ID] = p
	if rec, ok := n.records[spec.Topic]; ok && rec.Epoch > home.Epoch {
		p.homeGone(home.Node.ID, fmt.Errorf("%w: epoch %d superseded by %d while joining", ErrHomeLost, home.Epoch, rec.Epoch))
	}
	for _, s := range n.subs[spec.Topic] {
		p.subscriberUp(s)
	}
	n.addPubLocked(p.info())
	n.mu.Unlock()

	p.announce()
	n.sendWho(spec.Topic, TargetSubscriber) // a publication needs the topic's subscribers
	n.log.Info().Str("topic", spec.Topic).Str("publisher", spec.ID).Str("home", home.Node.ID).Msg("bus: publishing")
	return p, nil
}

func (p *Publication) info() PublisherInfo {
	return PublisherInfo{Topic: p.spec.Topic, ID: p.spec.ID, Node: p.n.self, Data: p.spec.Data}
}

// announce publishes the publisher, unless it was closed: under n.mu, so
// that no announcement (a re-announcement for a "who") can follow the
// withdrawal Close sends.
func (p *Publication) announce() {
	p.n.mu.Lock()
	defer p.n.mu.Unlock()
	if p.closed {
		return
	}
	p.n.publish(p.n.subject("d", kindPub, p.spec.Topic),
		&wireMsg{Kind: kindPub, Topic: p.spec.Topic, ID: p.spec.ID, Data: p.spec.Data})
}

// Topic is the topic published.
func (p *Publication) Topic() string { return p.spec.Topic }

// ID is the publisher id.
func (p *Publication) ID() string { return p.spec.ID }

// Home is where the topic's home lives.
func (p *Publication) Home() HomeInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.home
}

// IsHome reports whether this publication holds the topic's home.
func (p *Publication) IsHome() bool {
	p.n.mu.Lock()
	defer p.n.mu.Unlock()
	s := p.n.homes[p.spec.Topic]
	return s != nil && s.owner == p
}

// HomeErr is nil while the home is there, then an error wrapping
// ErrHomeLost.
func (p *Publication) HomeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.homeErr
}

// Subscribers lists the subscribers reported to OnSubscriber and not gone
// since, sorted by key.
func (p *Publication) Subscribers() []SubscriberInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]SubscriberInfo, 0, len(p.subs))
	for _, s := range p.subs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Close withdraws the publisher; if it held the topic's home, the home goes
// and the topic's other publishers get OnHomeLost. Callbacks already queued
// are dropped. Idempotent.
func (p *Publication) Close() error {
	n := p.n
	n.mu.Lock()
	if p.closed {
		n.mu.Unlock()
		return nil
	}
	p.closed = true
	delete(n.localPubs[p.spec.Topic], p.spec.ID)
	if len(n.localPubs[p.spec.Topic]) == 0 {
		delete(n.localPubs, p.spec.Topic)
	}
	n.removePubLocked(p.spec.Topic, p.info().Key(), ErrWithdrawn)
	n.mu.Unlock()
	p.q.close()
	n.publish(n.subject("d", kindPub, p.spec.Topic), &wireMsg{Kind: kindUnpub, Topic: p.spec.Topic, ID: p.spec.ID})
	n.dropHome(p)
	n.log.Info().Str("topic", p.spec.Topic).Str("publisher", p.spec.ID).Msg("bus: stopped publishing")
	return nil
}

// subscriberUp queues the report of s (after validation). Called with n.mu.
func (p *Publication) subscriberUp(s SubscriberInfo) {
	p.q.push(func() {
		if v := p.spec.ValidateSubscriber; v != nil {
			if err := v(s); err != nil {
				p.n.badInput(kindSub, fmt.Errorf("%w: subscriber %s of %q: %w", ErrRejected, s.Key(), s.Topic, err))
				return
			}
		}
		heard := p.held.heard(s) // held, and the same: reported already
		p.mu.Lock()
		p.subs[s.Key()] = s
		p.mu.Unlock()
		if f := p.spec.OnSubscriber; f != nil && !heard {
			f(s)
		}
	})
}

// subscriberDown queues the report that s is gone, if s was reported: at
// once, or once its hold ends if its node is only unheard (unheard.go).
func (p *Publication) subscriberDown(s SubscriberInfo, reason error) {
	p.q.push(func() {
		p.mu.Lock()
		_, ok := p.subs[s.Key()]
		delete(p.subs, s.Key())
		p.mu.Unlock()
		if !ok || p.held.down(s, reason) {
			return
		}
		if f := p.spec.OnSubscriberGone; f != nil {
			f(s, reason)
		}
	})
}

// heldGone queues the end of a held subscriber's hold: it withdrew, or its
// node left or restarted (inc: the incarnation heard now, 0 for none).
// Called with n.mu.
func (p *Publication) heldGone(key, node string, inc uint64, reason error) {
	p.q.push(func() { p.held.ended(key, node, inc, reason) })
}

// Rehome finds the topic's current home, or becomes it, after OnHomeLost
// (or a failed claim): it returns the new home once a live lease backs
// it, or an error wrapping ErrNoHome when ctx ends first. The home it
// returns may be the same epoch if its lease is still alive.
func (p *Publication) Rehome(ctx context.Context) (HomeInfo, error) {
	p.n.mu.Lock()
	closed := p.closed
	p.n.mu.Unlock()
	if closed {
		return HomeInfo{}, ErrClosed
	}
	home, err := p.n.resolveHome(ctx, p)
	if err != nil {
		return HomeInfo{}, err
	}
	p.mu.Lock()
	p.home, p.homeErr = home, nil
	p.mu.Unlock()
	p.n.log.Info().Str("topic", p.spec.Topic).Str("home", home.Node.ID).Uint64("epoch", home.Epoch).Msg("bus: new home")
	return home, nil
}

// leaseGone: the topic's lease was deleted or expired. Called with n.mu.
func (p *Publication) leaseGone() {
	p.mu.Lock()
	home := p.home
	p.mu.Unlock()
	if !home.Local {
		p.homeGone(home.Node.ID, fmt.Errorf("%w: the lease of %q (epoch %d) was deleted or expired", ErrHomeLost, p.spec.Topic, home.Epoch))
	}
}

// onRecord: a new home record. Called with n.mu.
func (p *Publication) onRecord(hi HomeInfo) {
	p.mu.Lock()
	home := p.home
	p.mu.Unlock()
	if hi.Epoch > home.Epoch && home.Epoch != 0 {
		p.homeGone(home.Node.ID, fmt.Errorf("%w: epoch %d of %q superseded by epoch %d", ErrHomeLost, home.Epoch, p.spec.Topic, hi.Epoch))
	}
	if f := p.spec.OnHome; f != nil && p.q != nil {
		p.q.push(func() { f(hi) })
	}
}

// homeGone records, once, that the home on node is gone. Called with n.mu.
func (p *Publication) homeGone(node string, reason error) {
	p.mu.Lock()
	if p.home.Node.ID != node || p.homeErr != nil {
		p.mu.Unlock()
		return
	}
	p.homeErr = reason
	home := p.home
	p.mu.Unlock()
	p.n.log.Warn().Str("topic", p.spec.Topic).Str("home", node).Err(reason).Msg("bus: topic home lost")
	if f := p.spec.OnHomeLost; f != nil {
		p.q.push(func() { f(home, reason) })
	}
}
