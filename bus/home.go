package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// homeSlot is a topic's home held by this node.
type homeSlot struct {
	owner *Publication
	desc  []byte
	sub   *nats.Subscription // P.home.<topic>; nil until the descriptor is ready

	// The lease loop's (holdLease), once started.
	epoch    uint64
	rec      homeRecord
	rev      uint64 // the record's revision in <prefix>_seqs
	leaseRev uint64 // the lease's revision in <prefix>_homes
	leaseAt  time.Time
	stop     chan struct{} // closed by dropHome: delete the lease and return
	done     chan struct{} // closed when holdLease returns
}

// resolveHome finds the topic's home or makes p the home. The topic's
// lease in JetStream decides (see lease.go):
//
//  1. a home already on this node is used;
//  2. a lease held, with the holder's record written, names the home;
//  3. no lease: Create takes it (unless Config.Homes names another node),
//     and this node becomes home in the epoch the Create's revision names;
//     a Create that finds the key lost the race: ask again.
//
// It waits for a lease or record change (or 50 ms) between attempts,
// until ctx ends.
func (n *Node) resolveHome(ctx context.Context, p *Publication) (HomeInfo, error) {
	topic := p.spec.Topic
	named, isNamed := n.cfg.Homes[topic]
	var lastErr error
	var wake chan struct{}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			d := time.Duration(20+rand.IntN(30)) * time.Millisecond
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-wake:
			case <-t.C:
			}
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			return HomeInfo{}, fmt.Errorf("%w: topic %q: %w (last: %v)", ErrNoHome, topic, err, lastErr)
		}
		if attempt > 0 && attempt%100 == 0 { // every few seconds while stuck
			n.log.Warn().Str("topic", topic).Err(lastErr).Int("attempts", attempt).Msg("bus: still looking for the topic's home")
		}
		n.mu.Lock()
		if err := n.checkOpen(); err != nil {
			n.mu.Unlock()
			return HomeInfo{}, err
		}
		wake = n.wakeChLocked(topic)
		if s := n.homes[topic]; s != nil {
			ready := s.sub != nil
			rec := s.rec
			desc := s.desc
			n.mu.Unlock()
			if !ready {
				lastErr = errors.New("home on this node is being set up")
				continue
			}
			hi := rec.info(topic, n.self)
			hi.Descriptor = desc
			return hi, nil
		}
		n.mu.Unlock()
		leases, _, err := n.kv(ctx)
		if errors.Is(err, ErrNoJetStream) {
			return HomeInfo{}, err
		}
		if err != nil {
			lastErr = err
			continue
		}
		hi, ok, err := n.currentHome(ctx, topic)
		if err != nil {
			lastErr = err
			continue
		}
		if ok {
			if hi.Local {
				lastErr = errors.New("the record names a home of this node that is gone")
				continue
			}
			return hi, nil
		}
		if isNamed && named != n.self.ID {
			lastErr = fmt.Errorf("Homes names %s as the home of %q", named, topic)
			continue
		}
		if !n.connected.Load() {
			lastErr = fmt.Errorf("%w: NATS disconnected", ErrConnect)
			continue
		}
		sent := time.Now()
		rev, err := leases.Create(ctx, kvKey(topic), n.leaseValue())
		if err != nil {
			if !casConflict(err) {
				lastErr = fmt.Errorf("%w: take the lease of %q: %v", ErrConnect, topic, err)
			} else {
				lastErr = errors.New("another node holds the lease")
			}
			continue
		}
		hi, err = n.becomeHome(ctx, p, rev, sent)
		if err == nil {
			return hi, nil
		}
		if !errors.Is(err, ErrHomeLost) && !errors.Is(err, ErrConnect) && !errors.Is(err, ErrNoHome) {
			return HomeInfo{}, err // NewHome's own error, a bad config, closed
		}
		lastErr = err
	}
}

// becomeHome makes p the topic's home in epoch (the revision of its lease's
// Create, sent at leaseAt). First it fences the predecessor: a
// compare-and-set of the record to this epoch, starting at the last
// reservation the predecessor wrote (after it, the predecessor cannot
// extend its reservation). Then NewHome makes the counter there, the
// record gets the descriptor, and the lease loop starts.
func (n *Node) becomeHome(ctx context.Context, p *Publication, epoch uint64, leaseAt time.Time) (HomeInfo, error) {
	topic := p.spec.Topic
	leases, seqs, err := n.kv(ctx)
	if err != nil {
		return HomeInfo{}, err
	}
	n.mu.Lock()
	if n.homes[topic] != nil {
		n.mu.Unlock()
		return HomeInfo{}, fmt.Errorf("%w: topic %q already has a home here", ErrDuplicate, topic)
	}
	slot := &homeSlot{epoch: epoch, leaseRev: epoch, leaseAt: leaseAt, stop: make(chan struct{}), done: make(chan struct{})}
	n.homes[topic] = slot
	n.mu.Unlock()
	fail := func(err error) (HomeInfo, error) {
		n.mu.Lock()
		delete(n.homes, topic)
		n.mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
		_ = leases.Delete(dctx, kvKey(topic), jetstream.LastRevision(slot.leaseRev))
		cancel()
		return HomeInfo{}, err
	}
	if p.spec.NewHome == nil {
		return fail(fmt.Errorf("%w: this node must be home of %q but PublishSpec.NewHome is nil", ErrInvalidConfig, topic))
	}
	var rec homeRecord
	var rev uint64
	for {
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("%w: fence the predecessor of %q: %w", ErrNoHome, topic, err))
		}
		old, orev, err := n.getRecord(ctx, seqs, topic)
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) {
			return fail(err)
		}
		start := uint64(1)
		if orev != 0 && err == nil {
			if old.Epoch >= epoch {
				return fail(fmt.Errorf("%w: topic %q has a newer home (epoch %d >= %d)", ErrHomeLost, topic, old.Epoch, epoch))
			}
			start = old.Reserved
		} else if orev != 0 {
			return fail(fmt.Errorf("home record of %q unreadable (%w): refusing to guess where the sequence starts", topic, err))
		}
		rec = homeRecord{Epoch: epoch, Node: n.self.ID, Host: n.self.HostID, Inc: n.self.Incarnation, Providers: n.self.Providers,
			Start: start, Reserved: start + n.cfg.ReserveChunk}
		b, err := n.encodeRecord(topic, rec)
		if err != nil {
			return fail(err)
		}
		if orev == 0 {
			rev, err = seqs.Create(ctx, kvKey(topic), b)
		} else {
			rev, err = seqs.Update(ctx, kvKey(topic), b, orev)
		}
		if err == nil {
			break
		}
		if !casConflict(err) {
			return fail(fmt.Errorf("%w: write home record of %q: %v", ErrConnect, topic, err))
		}
	}
	desc, err := p.spec.NewHome(ctx, topic, rec.Start)
	if err != nil {
		return fail(fmt.Errorf("bus: NewHome for %q: %w", topic, err))
	}
	if len(desc) == 0 || len(desc) > maxBlob {
		return fail(fmt.Errorf("%w: home descriptor of %d bytes, want 1..%d", ErrInvalidConfig, len(desc), maxBlob))
	}
	rec.Desc = desc
	b, err := n.encodeRecord(topic, rec)
	if err == nil {
		rev, err = seqs.Update(ctx, kvKey(topic), b, rev)
	}
	if err != nil {
		return fail(fmt.Errorf("%w: publish home record of %q: %v", ErrConnect, topic, err))
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
	p.setLease(epoch, leaseAt.Add(n.fenceAfter())) // before the first claim on the new counter
	n.mu.Lock()
	slot.owner, slot.desc, slot.sub, slot.rec, slot.rev = p, desc, sub, rec, rev
	n.wakeLocked(topic)
	n.mu.Unlock()
	n.wg.Add(1)
	go n.holdLease(topic, slot, leases, seqs)
	n.log.Info().Str("topic", topic).Uint64("epoch", epoch).Uint64("start", rec.Start).Msg("bus: this node is the topic's home")
	return rec.info(topic, n.self), nil
}

// dropHome gives up the topic's home if p holds it: the lease is deleted
// (the topic's other publishers take over at once), the query subscription
// goes and local publications get OnHomeLost.
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
	close(s.stop)
	<-s.done
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
// subscribers that read the journal, and for tools. ErrNoHome if no node
// holds the topic's lease.
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
		hi := s.rec.info(topic, n.self)
		hi.Descriptor = s.desc
		n.mu.Unlock()
		return hi, nil
	}
	n.mu.Unlock()
	hi, ok, err := n.currentHome(ctx, topic)
	if err != nil {
		return HomeInfo{}, err
	}
	if !ok {
		return HomeInfo{}, fmt.Errorf("%w: topic %q: nobody holds its lease", ErrNoHome, topic)
	}
	return hi, nil
}

// HomeRecord returns the topic's newest home record as JetStream holds it
// now, read afresh and checked as the watcher checks it, not as the watcher
// last delivered it: a node back from a NATS outage hears the records
// written meanwhile only once its watcher has restarted. ok false: the
// topic has no record yet.
func (n *Node) HomeRecord(ctx context.Context, topic string) (hi HomeInfo, ok bool, err error) {
	if err := checkTopic("topic", topic); err != nil {
		return HomeInfo{}, false, err
	}
	n.mu.Lock()
	err = n.checkOpen()
	n.mu.Unlock()
	if err != nil {
		return HomeInfo{}, false, err
	}
	_, seqs, err := n.kv(ctx)
	if err != nil {
		return HomeInfo{}, false, err
	}
	rec, rev, err := n.getRecord(ctx, seqs, topic)
	if err != nil || rev == 0 {
		return HomeInfo{}, false, err
	}
	return rec.info(topic, n.self), true, nil
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
