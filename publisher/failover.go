package publisher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/ring"
)

// Failover. A publisher never exits because the topic's home went away.
// The bus elects homes on a JetStream lease (see bus); the publisher
// follows:
//
//   - every new home record of its epoch raises the writer's limit to the
//     home's reservation (ring.Writer.SetLimit), so it never writes a
//     sequence the home did not reserve;
//   - a newer epoch, a deleted or expired lease, or a lost home sets the
//     limit to 0: the next claim returns ring.ErrFenced without claiming;
//   - a publish that fails with ErrFenced, ErrHomeFailed (the QP to the
//     home died) or ErrTimeout (the home did not answer) runs failover on
//     the publishing goroutine: Rehome finds or becomes the next home, a
//     new writer is connected to it, every subscriber's queue pair moves to
//     it, and the publish is retried once. If no home is reachable within
//     Config.FailoverTimeout, or the retry fails the same way, the publish
//     returns ErrNoHome; the next one tries again. A home that does not
//     answer (ErrTimeout) is no different: an unanswered claim is never
//     written (subscribers report its sequence as a gap, never silently),
//     and a publish ends in ErrNoHome, never in an error that would stop a
//     feed with the home's link broken.
//
// The retired writer, its queue pair and an earlier home of ours are
// closed at Close (a write still in flight may read their memory).

// writer is the current writer, for control paths (the publishing
// goroutine reads p.w directly: it is the only one that replaces it).
func (p *Publisher) writer() *ring.Writer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w
}

// homeCounter is the home's counter, for the bus's reservation. A fenced
// counter (FenceCounter: lost, or closing) is 0: reserving from its value
// would write a reservation above ring.FenceAdd into the home record, and
// the next epoch would start there.
func (p *Publisher) homeCounter() uint64 {
	p.mu.Lock()
	h := p.home
	p.mu.Unlock()
	if h == nil {
		return 0
	}
	if c := h.Counter(); c < ring.FenceAdd {
		return c
	}
	return 0
}

// onHome: a new home record of the topic (bus event goroutine).
func (p *Publisher) onHome(hi bus.HomeInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	switch {
	case hi.Local && hi.Epoch <= p.lostEpoch:
		// a record of our home that was lost: its writer stays fenced
	case hi.Epoch == p.epoch && hi.Reserved > p.w.Limit():
		p.w.SetLimit(hi.Reserved)
	case hi.Epoch > p.epoch:
		p.w.SetLimit(0) // a newer home: stop claiming on the old one
	}
}

// onLease: the home of this publication renewed its lease (bus lease
// goroutine). The writer on it refuses claims after end: a process that
// stalled past its lease (SIGSTOP, starvation) runs its publishing
// goroutine again before the lease loop can fence the home, and what it
// claimed then would land over a newer epoch's ticks.
func (p *Publisher) onLease(epoch uint64, end time.Time) {
	p.mu.Lock()
	if p.w != nil && p.epoch == epoch {
		p.w.SetLeaseEnd(end)
	}
	p.mu.Unlock()
}

// onHomeLost: the home went (bus event goroutine).
func (p *Publisher) onHomeLost(h bus.HomeInfo, err error) {
	if h.Local {
		p.fenceHome(h.Descriptor) // before the lease can expire elsewhere
	}
	p.mu.Lock()
	if h.Local {
		p.lostEpoch = max(p.lostEpoch, h.Epoch)
	}
	if p.w != nil && h.Epoch == p.epoch {
		p.w.SetLimit(0)
	} else if p.w == nil {
		p.homeLost = true
	}
	p.mu.Unlock()
	p.log.Warn().Err(err).Str("home", h.Node.ID).Uint64("epoch", h.Epoch).Msg("publisher: the topic's home is gone; the next publish fails over")
}

// publishErr maps a writer's error to the publisher's.
func (p *Publisher) publishErr(err error) error {
	switch err {
	case ring.ErrPayloadTooLarge:
		return ErrTooLarge
	case ring.ErrFenced, ring.ErrHomeFailed, ring.ErrTimeout:
		// failover ran and found no home that answers (or the retry on the
		// new writer failed again): retryable, as documented above
		return ErrNoHome
	}
	return err
}

// failover replaces the writer with one on the topic's current home, if
// err says the home is gone or fenced. It reports whether a new writer is
// in place. Publishing goroutine only.
func (p *Publisher) failover(err error) bool {
	if err != ring.ErrFenced && err != ring.ErrHomeFailed && err != ring.ErrTimeout {
		return false
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.FailoverTimeout)
	defer cancel()
	old := p.epoch
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if p.gate.IsShut() {
			return false // Close waits for this publish: no new writer
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		hi, rerr := p.pub.Rehome(ctx)
		if rerr != nil {
			if errors.Is(rerr, bus.ErrClosed) {
				return false
			}
			continue
		}
		if hi.Epoch == old && err == ring.ErrFenced && p.w.Limit() != 0 && hi.Reserved > p.w.Limit() {
			// the same home extended its reservation before we heard: go on
			p.w.SetLimit(hi.Reserved)
			return true
		}
		timeout := p.cfg.ConnectTimeout
		if hi.Epoch == old {
			// the same home: its lease is still alive, but it may be
			// stopped; do not wait long before looking again
			timeout = min(timeout, 500*time.Millisecond)
		}
		if rem := time.Until(began.Add(p.cfg.FailoverTimeout)); rem < timeout {
			timeout = rem
		}
		if serr := p.switchHome(ctx, hi, timeout); serr != nil {
			p.log.Debug().Err(serr).Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Msg("publisher: failover connect failed; retrying")
			continue
		}
		took := time.Since(began)
		p.mu.Lock()
		p.failovers = append(p.failovers, took)
		p.mu.Unlock()
		p.log.Info().Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Uint64("start", hi.Start).Dur("took", took).
			Bool("home_here", hi.Local).Msg("publisher: failed over to the topic's home")
		return true
	}
	p.log.Warn().Dur("waited", time.Since(began)).Msg("publisher: no home reachable; publish returns ErrNoHome")
	return false
}

// switchHome connects a writer to hi and moves every target to it.
func (p *Publisher) switchHome(ctx context.Context, hi bus.HomeInfo, timeout time.Duration) error {
	w, qp, cq, err := p.dialHome(ctx, hi, timeout)
	if err != nil {
		if qp != nil {
			_ = qp.Close()
		}
		if cq != nil {
			_ = cq.Close()
		}
		return err
	}
	if hi.Reserved != 0 {
		w.SetLimit(hi.Reserved)
	}
	p.mu.Lock()
	if hi.Local && hi.Epoch <= p.lostEpoch {
		// Our home of that epoch was lost (and its counter fenced) while we
		// connected: a writer on it could claim nothing. Look again.
		p.mu.Unlock()
		_, _, _ = w.Close(), qp.Close(), cq.Close()
		return fmt.Errorf("%w: our home of epoch %d was lost while the writer connected", ring.ErrFenced, hi.Epoch)
	}
	oldW, oldQP, oldCQ := p.w, p.homeQP, p.cq
	for key, t := range p.targets {
		if p.dropped[t.id] {
			continue // its reconnect adds it to whichever writer is current
		}
		_ = oldW.RemoveTarget(t.id)
		cd, err := w.AddTarget(t.rt)
		if err != nil {
			p.log.Warn().Err(err).Str("subscriber", key).Msg("publisher: subscriber not moved to the new home's writer")
			continue
		}
		if t.credit != nil {
			// a new cell: until the subscriber connects to it again, the
			// writer reads the ring's head instead (one READ per full look)
			t.credit, _ = cd.MarshalBinary()
		}
	}
	p.w, p.homeQP, p.cq, p.epoch = w, qp, cq, hi.Epoch
	p.retired = append(p.retired, oldW.Close, oldQP.Close, oldCQ.Close)
	p.mu.Unlock()
	return nil
}

// Failovers lists how long each failover of this publisher took, from the
// failed publish to the new writer (for tests and benchmarks).
func (p *Publisher) Failovers() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.failovers...)
}

// Epoch is the epoch of the home the publisher claims in now.
func (p *Publisher) Epoch() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}
