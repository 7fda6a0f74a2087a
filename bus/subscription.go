package bus

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// SubscribeSpec says what a subscriber of a topic offers and needs. The
// callbacks run one at a time, in order, on the subscription's own
// goroutine; they may call the bus but should not block for long.
type SubscribeSpec struct {
	Topic string
	// ID names this subscriber among the topic's subscribers on this node;
	// default the node id.
	ID   string
	Mode Mode // default ModeLossy
	// Ring is the ring descriptor announced to publishers (opaque bytes
	// versioned by the ring package).
	Ring []byte
	// Accept serves publishers' connects (TargetSubscriber): create a QP,
	// connect it, reply with its endpoint and the ring's region. Required.
	Accept AcceptFunc
	// ValidatePublisher, if set, checks each announced publisher; one it
	// rejects is logged (rate-limited), counted and never reported.
	ValidatePublisher func(PublisherInfo) error
	// OnPublisher is called once for every publisher of the topic, now and
	// later (this node's included): reliable subscribers connect to its
	// credit cells, and any subscriber may read the journal through the home.
	OnPublisher func(PublisherInfo)
	// OnPublisherGone is called once when a reported publisher withdraws or
	// its node leaves, times out (if held, when the hold ends: see
	// PublisherReachable) or restarts.
	OnPublisherGone func(PublisherInfo, error)
	// PublisherReachable, OnPublisherUnheard and OnPublisherHeard hold a
	// publisher whose node the bus lost by heartbeat while its queue pairs
	// are up, as PublishSpec.SubscriberReachable and its callbacks hold a
	// subscriber (unheard.go, Config.UnheardHold). Optional.
	PublisherReachable func(PublisherInfo) bool
	OnPublisherUnheard func(p PublisherInfo, hold time.Duration)
	OnPublisherHeard   func(p PublisherInfo, unheard time.Duration)
	// OnHome is called with the topic's home record as it is when the
	// subscription starts (if there is one) and with every change: a new
	// reservation, or a new epoch after a failover (HomeInfo.Start: the
	// first sequence of the new epoch).
	OnHome func(HomeInfo)
	// OnReconnect is called after this node's connection to NATS came
	// back (whatever it missed meanwhile, such as a publisher's last
	// announcements, is not replayed). Optional.
	OnReconnect func()
}

// Subscription is this node subscribing to one topic.
type Subscription struct {
	n    *Node
	spec SubscribeSpec
	q    *eventQueue

	mu     sync.Mutex
	pubs   map[string]PublisherInfo // reported to OnPublisher and not gone (nor held)
	held   *holds[PublisherInfo]    // lost by heartbeat, still reachable (unheard.go); on q only
	closed bool                     // guarded by n.mu
}

// Subscribe announces a subscriber of spec.Topic, serves publishers'
// connects to it through spec.Accept and reports publishers now and later.
func (n *Node) Subscribe(_ context.Context, spec SubscribeSpec) (*Subscription, error) {
	if spec.ID == "" {
		spec.ID = n.self.ID
	}
	if spec.Mode == "" {
		spec.Mode = ModeLossy
	}
	if err := checkTopic("SubscribeSpec.Topic", spec.Topic); err != nil {
		return nil, err
	}
	if err := checkToken("SubscribeSpec.ID", spec.ID); err != nil {
		return nil, err
	}
	if !spec.Mode.valid() {
		return nil, fmt.Errorf("%w: SubscribeSpec.Mode %q, want lossy or reliable", ErrInvalidConfig, spec.Mode)
	}
	if len(spec.Ring) > maxBlob {
		return nil, fmt.Errorf("%w: SubscribeSpec.Ring of %d bytes, want at most %d", ErrInvalidConfig, len(spec.Ring), maxBlob)
	}
	if spec.Accept == nil {
		return nil, fmt.Errorf("%w: SubscribeSpec.Accept is nil", ErrInvalidConfig)
	}
	s := &Subscription{n: n, spec: spec, pubs: map[string]PublisherInfo{}}
	if spec.OnHome != nil {
		// Home records (epochs) need JetStream; without it the ring still
		// works, but cannot name the sequences a failover skipped. Never
		// block a subscription on it (a cluster's JetStream may still be
		// electing its leader): the watchers start when it answers.
		go n.ensureKV()
	}
	n.mu.Lock()
	if err := n.checkOpen(); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if n.localSubs[spec.Topic][spec.ID] != nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: subscriber %q of topic %q", ErrDuplicate, spec.ID, spec.Topic)
	}
	s.q = newEventQueue()
	s.held = newHolds(s.q, n.cfg.UnheardHold, samePub, spec.PublisherReachable, spec.OnPublisherUnheard, spec.OnPublisherHeard,
		func(p PublisherInfo, reason error) {
			if f := s.spec.OnPublisherGone; f != nil {
				f(p, reason)
			}
		})
	if n.localSubs[spec.Topic] == nil {
		n.localSubs[spec.Topic] = map[string]*Subscription{}
	}
	n.localSubs[spec.Topic][spec.ID] = s
	for _, p := range n.pubs[spec.Topic] {
		s.publisherUp(p)
	}
	if rec, ok := n.records[spec.Topic]; ok {
		s.onHome(rec.info(spec.Topic, n.self))
	}
	n.addSubLocked(s.info())
	n.mu.Unlock()

	s.announce()
	n.sendWho(spec.Topic, TargetPublisher) // a subscription needs the topic's publishers
	n.log.Info().Str("topic", spec.Topic).Str("subscriber", spec.ID).Str("mode", string(spec.Mode)).Msg("bus: subscribed")
	return s, nil
}

func (s *Subscription) info() SubscriberInfo {
	return SubscriberInfo{Topic: s.spec.Topic, ID: s.spec.ID, Node: s.n.self, Mode: s.spec.Mode, Ring: s.spec.Ring}
}

// announce publishes the subscriber, unless it was closed: under n.mu, so
// that no announcement (a re-announcement for a "who") can follow the
// withdrawal Close sends.
func (s *Subscription) announce() {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.closed {
		return
	}
	s.n.publish(s.n.subject("d", kindSub, s.spec.Topic),
		&wireMsg{Kind: kindSub, Topic: s.spec.Topic, ID: s.spec.ID, Mode: string(s.spec.Mode), Desc: s.spec.Ring})
}

// Topic is the topic subscribed.
func (s *Subscription) Topic() string { return s.spec.Topic }

// ID is the subscriber id.
func (s *Subscription) ID() string { return s.spec.ID }

// Publishers lists the publishers reported to OnPublisher and not gone
// since, sorted by key.
func (s *Subscription) Publishers() []PublisherInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PublisherInfo, 0, len(s.pubs))
	for _, p := range s.pubs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Close withdraws the subscriber: publishers get OnSubscriberGone with
// ErrWithdrawn. Idempotent.
func (s *Subscription) Close() error {
	n := s.n
	n.mu.Lock()
	if s.closed {
		n.mu.Unlock()
		return nil
	}
	s.closed = true
	delete(n.localSubs[s.spec.Topic], s.spec.ID)
	if len(n.localSubs[s.spec.Topic]) == 0 {
		delete(n.localSubs, s.spec.Topic)
	}
	n.removeSubLocked(s.spec.Topic, s.info().Key(), ErrWithdrawn)
	n.mu.Unlock()
	s.q.close()
	n.publish(n.subject("d", kindSub, s.spec.Topic), &wireMsg{Kind: kindUnsub, Topic: s.spec.Topic, ID: s.spec.ID})
	n.log.Info().Str("topic", s.spec.Topic).Str("subscriber", s.spec.ID).Msg("bus: unsubscribed")
	return nil
}

func (s *Subscription) publisherUp(p PublisherInfo) {
	s.q.push(func() {
		if v := s.spec.ValidatePublisher; v != nil {
			if err := v(p); err != nil {
				s.n.badInput(kindPub, fmt.Errorf("%w: publisher %s of %q: %w", ErrRejected, p.Key(), p.Topic, err))
				return
			}
		}
		heard := s.held.heard(p) // held, and the same: reported already
		s.mu.Lock()
		s.pubs[p.Key()] = p
		s.mu.Unlock()
		if f := s.spec.OnPublisher; f != nil && !heard {
			f(p)
		}
	})
}

// publisherDown queues the report that p is gone, if p was reported: at
// once, or once its hold ends if its node is only unheard (unheard.go).
func (s *Subscription) publisherDown(p PublisherInfo, reason error) {
	s.q.push(func() {
		s.mu.Lock()
		_, ok := s.pubs[p.Key()]
		delete(s.pubs, p.Key())
		s.mu.Unlock()
		if !ok || s.held.down(p, reason) {
			return
		}
		if f := s.spec.OnPublisherGone; f != nil {
			f(p, reason)
		}
	})
}

// heldGone is Publication.heldGone for held publishers. Called with n.mu.
func (s *Subscription) heldGone(key, node string, inc uint64, reason error) {
	s.q.push(func() { s.held.ended(key, node, inc, reason) })
}

// reconnected queues OnReconnect. Called with n.mu.
func (s *Subscription) reconnected() {
	if f := s.spec.OnReconnect; f != nil && s.q != nil {
		s.q.push(f)
	}
}

// onHome queues a home record for OnHome. Called with n.mu.
func (s *Subscription) onHome(hi HomeInfo) {
	if f := s.spec.OnHome; f != nil && s.q != nil {
		s.q.push(func() { f(hi) })
	}
}
