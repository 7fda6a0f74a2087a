package publisher

import (
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/ring"
)

// Close refuses every later publish (ring.ErrClosed) and waits for one
// under way on another goroutine to return, then waits (up to the
// writer's timeout) for every posted write to land, withdraws the
// publisher (if it is the topic's home, the home goes with it), stops the
// writer and closes every queue pair. A publish that has not returned
// within closeWait (it is stuck past every timeout of its own) keeps
// the writer's memory: Close withdraws the publisher from the bus, leaves
// that memory mapped (unmapping it under the publish would fault), and
// says so in its error. Idempotent.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		if wait := p.closeWait(); !p.gate.Shut(wait) {
			err := fmt.Errorf("publisher: close: a publish on another goroutine did not return within %v; its writer and queue pairs are left open (unmapping them under it would fault)", wait)
			p.log.Error().Err(err).Msg("publisher: close")
			p.closeErr = errors.Join(err, p.pub.Close())
			return
		}
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
		desc, h := p.homeDesc, p.home
		p.mu.Unlock()
		if h != nil {
			h.Share() // a solo writer's unused run goes back: the counter the fence returns is exact
		}
		// claims still racing to our counter are refused, not lost; the
		// counter it ended at goes into the home record (the bus writes it
		// when p.pub closes), so a subscriber this publisher had stopped
		// writing to names what it never got
		if c, ok := p.fenceHome(desc); ok && c < ring.FenceAdd {
			p.end.Store(c)
		}
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

// closeWait bounds how long Close waits for a publish under way: the
// longest a publish can take by its own timeouts (two writer waits, a
// failover and the connect inside it), and a second more.
func (p *Publisher) closeWait() time.Duration {
	return 2*p.cfg.Timeout + p.cfg.FailoverTimeout + p.cfg.ConnectTimeout + time.Second
}
