package publisher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

type target struct {
	id   uint64
	info bus.SubscriberInfo
	conn conn
	rt   ring.Target // as added to the writer: moved to the next one at a failover
	// credit is the CreditDesc of the ring's credit cell at the writer
	// (reliable rings), for the subscriber's connect (acceptCredit).
	credit []byte
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
// (A subscriber the bus held while its node was unheard and heard again is
// not reported again: onSubscriberHeard.)
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

// onSubscriberGone removes a subscriber that withdrew, left or restarted,
// or whose node the bus lost by heartbeat (bus.ErrPeerLost) while its
// queue pair was down, or after the bus held it (subscriberReachable)
// until its queue pair failed (bus.ErrHoldFailed) or the hold ended
// (bus.ErrHoldEnded): counted in UnheardDrops, and logged as a warning.
func (p *Publisher) onSubscriberGone(s bus.SubscriberInfo, reason error) {
	p.mu.Lock()
	t := p.targets[s.Key()]
	delete(p.targets, s.Key())
	p.mu.Unlock()
	if t == nil {
		return
	}
	held := errors.Is(reason, bus.ErrHoldFailed) || errors.Is(reason, bus.ErrHoldEnded)
	if held {
		p.unheardDrops.Add(1)
	}
	if err := p.writer().RemoveTarget(t.id); err != nil && !errors.Is(err, ring.ErrNoTarget) {
		p.log.Warn().Err(err).Uint64("target", t.id).Msg("publisher: remove target")
	}
	_ = t.conn.close()
	if held {
		p.log.Warn().Str("subscriber", s.Key()).Err(reason).Uint64("target", t.id).
			Msg("publisher: dropped a subscriber whose node is unheard on NATS")
		return
	}
	p.log.Info().Str("subscriber", s.Key()).Err(reason).Msg("publisher: subscriber gone; dropped its queue pair")
}

// subscriberReachable is the bus's liveness check for a subscriber whose
// node it lost by heartbeat (bus.PublishSpec.SubscriberReachable): while
// its queue pair is up the bus holds it, and the writer goes on writing
// into its ring. A dead host's queue pair fails (the writer drops it on an
// error or unanswered completion while it publishes; tcp's watchdog and
// keepalive, shm's peer socket, a verbs QP's ERR otherwise) and the bus
// sees it within its check interval.
func (p *Publisher) subscriberReachable(s bus.SubscriberInfo) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.targets[s.Key()]
	return t != nil && !p.closed && sameSubscriber(t.info, s) && p.live(t)
}

// onSubscriberUnheard: the bus holds s (subscriberReachable).
func (p *Publisher) onSubscriberUnheard(s bus.SubscriberInfo, hold time.Duration) {
	p.log.Warn().Str("subscriber", s.Key()).Err(bus.ErrPeerLost).Uint64("target", p.targetID(s)).Dur("hold", hold).
		Msg("publisher: subscriber's node unheard on NATS, but its queue pair is up; still writing to it until the queue pair fails or the hold ends")
}

// onSubscriberHeard: a held subscriber's node re-announced it, the same
// incarnation with the same ring: the same target, no new connection, and
// the writes never stopped.
func (p *Publisher) onSubscriberHeard(s bus.SubscriberInfo, unheard time.Duration) {
	p.log.Info().Str("subscriber", s.Key()).Dur("unheard", unheard).Uint64("target", p.targetID(s)).
		Msg("publisher: subscriber's node heard again; its queue pair never stopped")
}

func (p *Publisher) targetID(s bus.SubscriberInfo) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.targets[s.Key()]; t != nil {
		return t.id
	}
	return 0
}

// live reports whether t's queue pair is up: not dropped by the writer,
// and in RTS (the provider's own liveness: a tcp connection that reset or
// stopped answering, an shm peer whose process is gone, a verbs QP in ERR).
// Called with p.mu.
func (p *Publisher) live(t *target) bool {
	return !p.dropped[t.id] && t.conn.qp.State() == rdma.QPReadyToSend
}

// sameSubscriber: a and b are one subscriber's announcement, of one
// incarnation of its node, with the same ring.
func sameSubscriber(a, b bus.SubscriberInfo) bool {
	return a.Key() == b.Key() && a.Node.Incarnation == b.Node.Incarnation && a.Mode == b.Mode && bytes.Equal(a.Ring, b.Ring)
}

// UnheardDrops is how many subscribers this publisher dropped after the
// bus held them while their node was unheard on NATS (their queue pair
// failed meanwhile, or bus.Config.UnheardHold passed). Writer drops
// (Stats().Dropped) count the queue-pair failures too.
func (p *Publisher) UnheardDrops() uint64 { return p.unheardDrops.Load() }

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
