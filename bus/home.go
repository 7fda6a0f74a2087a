package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// homeSlot is a topic's home held by this node.
type homeSlot struct {
	owner *Publication
	desc  []byte
	sub   *nats.Subscription // P.home.<topic>; nil until the descriptor is ready
}

// claim is this node's claim in progress for a topic's home.
type claim struct {
	once    sync.Once
	yielded chan struct{}
}

func (c *claim) yield() { c.once.Do(func() { close(c.yielded) }) }

// resolveHome finds the topic's home or makes p the home:
//
//  1. a home already on this node is used;
//  2. Config.Homes naming this node makes it home at once; naming another
//     node means asking that node until ctx ends;
//  3. otherwise ask P.home.<topic>; the current home answers;
//  4. with no answer, claim on P.d.home.<topic> and wait ClaimWindow: a
//     claim from a node with a smaller id, or an assertion from a home,
//     makes us yield and ask again; otherwise we are home.
func (n *Node) resolveHome(ctx context.Context, p *Publication) (HomeInfo, error) {
	topic := p.spec.Topic
	named, isNamed := n.cfg.Homes[topic]
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := time.Duration(10+rand.IntN(40)) * time.Millisecond
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if err := ctx.Err(); err != nil {
			return HomeInfo{}, fmt.Errorf("%w: topic %q: %w (last: %v)", ErrNoHome, topic, err, lastErr)
		}
		n.mu.Lock()
		if err := n.checkOpen(); err != nil {
			n.mu.Unlock()
			return HomeInfo{}, err
		}
		if s := n.homes[topic]; s != nil {
			ready := s.sub != nil
			desc := s.desc
			n.mu.Unlock()
			if !ready {
				lastErr = errors.New("home on this node is being set up")
				continue
			}
			return HomeInfo{Topic: topic, Node: n.self, Descriptor: desc, Local: true}, nil
		}
		claiming := n.claims[topic] != nil
		n.mu.Unlock()
		if claiming {
			lastErr = errors.New("another publication on this node is claiming")
			continue
		}
		if isNamed && named == n.self.ID {
			return n.becomeHome(ctx, p, false)
		}
		info, err := n.queryHome(ctx, topic)
		if err == nil {
			return info, nil
		}
		lastErr = err
		if !errors.Is(err, ErrNoPeer) || isNamed {
			continue
		}
		if !n.connected.Load() { // no answer because nobody can hear us: claiming now could make a second home
			lastErr = fmt.Errorf("%w: NATS disconnected", ErrConnect)
			continue
		}
		won, err := n.claim(ctx, topic)
		if err != nil {
			lastErr = err
			continue
		}
		if won {
			return n.becomeHome(ctx, p, true)
		}
	}
}

// queryHome asks the topic's current home.
func (n *Node) queryHome(ctx context.Context, topic string) (HomeInfo, error) {
	w, err := n.request(ctx, n.subject("home", topic), &wireMsg{Kind: kindHomeQuery, Topic: topic}, "homei")
	if err != nil {
		return HomeInfo{}, err
	}
	if w.Kind == kindError {
		return HomeInfo{}, errorFromWire(w)
	}
	if w.Kind != kindHomeInfo || w.Topic != topic {
		err := fmt.Errorf("%w: home reply of kind %q for topic %q", ErrMalformed, w.Kind, w.Topic)
		n.badInput("homei", err)
		return HomeInfo{}, err
	}
	n.mu.Lock()
	p, _ := n.touchLocked(w.peer()) // so that its death is noticed even before its first heartbeat
	var info PeerInfo
	if p != nil {
		info = p.info // under the lock: discovery updates it
	}
	n.mu.Unlock()
	if p == nil {
		return HomeInfo{}, fmt.Errorf("%w: home reply from an older incarnation of %s", ErrNoPeer, w.Node.ID)
	}
	return HomeInfo{Topic: topic, Node: info, Descriptor: w.Desc}, nil
}

// request sends w to subj and decodes the reply; no responder or no answer
// in time is ErrNoPeer.
func (n *Node) request(ctx context.Context, subj string, w *wireMsg, replyKind string) (*wireMsg, error) {
	b, err := n.seal(subj, w)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	m, err := n.nc.RequestWithContext(ctx, subj, b)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: no responder on %s", ErrNoPeer, subj)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, fmt.Errorf("%w: no answer on %s: %v", ErrNoPeer, subj, err)
	case errors.Is(err, nats.ErrConnectionClosed):
		return nil, fmt.Errorf("%w: %v", ErrClosed, err)
	case err != nil:
		return nil, fmt.Errorf("%w: request %s: %v", ErrNoPeer, subj, err)
	}
	r, err := n.open(m.Subject, m.Data)
	if err == nil {
		err = n.authorize(r)
	}
	if err != nil {
		n.badInput(replyKind, err)
		return nil, err
	}
	return r, nil
}

// claim publishes a claim for topic's home and waits ClaimWindow for a
// reason to yield.
func (n *Node) claim(ctx context.Context, topic string) (bool, error) {
	c := &claim{yielded: make(chan struct{})}
	n.mu.Lock()
	if n.claims[topic] != nil || n.homes[topic] != nil {
		n.mu.Unlock()
		return false, nil
	}
	n.claims[topic] = c
	n.mu.Unlock()
	n.publish(n.subject("d", "home", topic), &wireMsg{Kind: kindClaim, Topic: topic})
	won := false
	var err error
	t := time.NewTimer(n.cfg.ClaimWindow)
	select {
	case <-c.yielded:
	case <-t.C:
		won = true
	case <-ctx.Done():
		err = ctx.Err()
	}
	t.Stop()
	n.mu.Lock()
	delete(n.claims, topic)
	select {
	case <-c.yielded:
		won = false
	default:
	}
	if won {
		if n.homes[topic] != nil {
			won = false
		} else {
			n.homes[topic] = &homeSlot{} // claims that arrive now are answered with an assertion
		}
	}
	n.mu.Unlock()
	n.log.Debug().Str("topic", topic).Bool("won", won).Msg("bus: home claim")
	return won, err
}

// becomeHome makes p the topic's home: NewHome makes the descriptor, then
// P.home.<topic> answers queries and an assertion tells claimers.
func (n *Node) becomeHome(ctx context.Context, p *Publication, claimed bool) (HomeInfo, error) {
	topic := p.spec.Topic
	if !claimed {
		n.mu.Lock()
		if n.homes[topic] != nil {
			n.mu.Unlock()
			return HomeInfo{}, fmt.Errorf("%w: topic %q already has a home here", ErrDuplicate, topic)
		}
		n.homes[topic] = &homeSlot{}
		n.mu.Unlock()
	}
	n.mu.Lock()
	slot := n.homes[topic] // only this goroutine fills a not-ready slot
	n.mu.Unlock()
	fail := func(err error) (HomeInfo, error) {
		n.mu.Lock()
		delete(n.homes, topic)
		n.mu.Unlock()
		n.publish(n.subject("d", "home", topic), &wireMsg{Kind: kindUnhome, Topic: topic})
		return HomeInfo{}, err
	}
	if p.spec.NewHome == nil {
		return fail(fmt.Errorf("%w: this node must be home of %q but PublishSpec.NewHome is nil", ErrInvalidConfig, topic))
	}
	desc, err := p.spec.NewHome(ctx, topic)
	if err != nil {
		return fail(fmt.Errorf("bus: NewHome for %q: %w", topic, err))
	}
	if len(desc) > maxBlob {
		return fail(fmt.Errorf("%w: home descriptor of %d bytes, want at most %d", ErrInvalidConfig, len(desc), maxBlob))
	}
	sub, err := n.nc.Subscribe(n.subject("home", topic), func(m *nats.Msg) { n.onHomeQuery(topic, m) })
	if err == nil {
		err = n.flush(ctx)
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return fail(fmt.Errorf("%w: home subscription for %q: %v", ErrConnect, topic, err))
	}
	n.mu.Lock()
	slot.owner, slot.desc, slot.sub = p, desc, sub
	n.mu.Unlock()
	n.publish(n.subject("d", "home", topic), &wireMsg{Kind: kindHome, Topic: topic})
	n.log.Info().Str("topic", topic).Msg("bus: this node is the topic's home")
	return HomeInfo{Topic: topic, Node: n.self, Descriptor: desc, Local: true}, nil
}

// dropHome gives up the topic's home if p holds it: the query subscription
// goes, peers hear "unhome" and local publications get OnHomeLost.
func (n *Node) dropHome(p *Publication) {
	topic := p.spec.Topic
	n.mu.Lock()
	s := n.homes[topic]
	if s == nil || s.owner != p {
		n.mu.Unlock()
		return
	}
	delete(n.homes, topic)
	n.homeGoneLocked(topic, n.self.ID, fmt.Errorf("%w: home publication of %q closed", ErrHomeLost, topic))
	n.mu.Unlock()
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
	n.publish(n.subject("d", "home", topic), &wireMsg{Kind: kindUnhome, Topic: topic})
}

// onHomeQuery answers a query on P.home.<topic>.
func (n *Node) onHomeQuery(topic string, m *nats.Msg) {
	n.counters.messagesIn.Add(1)
	w, err := n.open(m.Subject, m.Data)
	if err == nil && (w.Kind != kindHomeQuery || w.Topic != topic) {
		err = fmt.Errorf("%w: kind %q topic %q on home subject of %q", ErrMalformed, w.Kind, w.Topic, topic)
	}
	if err == nil {
		err = n.authorize(w)
	}
	if err != nil {
		n.badInput("homeq", err)
		n.reply(m, &wireMsg{Kind: kindError, Code: codeMalformed, Err: err.Error()})
		return
	}
	n.mu.Lock()
	s := n.homes[topic]
	var desc []byte
	ready := s != nil && s.sub != nil
	if ready {
		desc = s.desc
	}
	n.mu.Unlock()
	if !ready {
		n.reply(m, &wireMsg{Kind: kindError, Code: codeNotHome, Err: "not home of " + topic})
		return
	}
	n.reply(m, &wireMsg{Kind: kindHomeInfo, Topic: topic, Desc: desc})
}

// reply answers a request, if it has a reply subject.
func (n *Node) reply(m *nats.Msg, w *wireMsg) {
	if m.Reply == "" {
		return
	}
	n.publish(m.Reply, w)
}

// FindHome returns the topic's home without ever claiming it: for
// subscribers that read the journal, and for tools. ErrNoHome if no node is
// the home.
func (n *Node) FindHome(ctx context.Context, topic string) (HomeInfo, error) {
	if err := checkTopic("topic", topic); err != nil {
		return HomeInfo{}, err
	}
	n.mu.Lock()
	if err := n.checkOpen(); err != nil {
		n.mu.Unlock()
		return HomeInfo{}, err
	}
	if s := n.homes[topic]; s != nil && s.sub != nil {
		desc := s.desc
		n.mu.Unlock()
		return HomeInfo{Topic: topic, Node: n.self, Descriptor: desc, Local: true}, nil
	}
	n.mu.Unlock()
	h, err := n.queryHome(ctx, topic)
	if errors.Is(err, ErrNoPeer) {
		return HomeInfo{}, fmt.Errorf("%w: topic %q: %w", ErrNoHome, topic, err)
	}
	return h, err
}
