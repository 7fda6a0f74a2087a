package subscriber

import (
	"context"
	"sync/atomic"

	"github.com/tickbus/tickbus/ring"
)

// Poll delivers what is ready to the handler and returns how much it
// delivered (ticks plus events), for an idle strategy. It allocates
// nothing, takes no lock and makes no syscall. One goroutine polls; once
// Close has begun, on any goroutine, Poll delivers nothing and returns 0
// (Close drains the ring itself).
func (s *Subscriber) Poll() int {
	if !s.gate.Enter() { // Close has begun: the ring is Close's now
		return 0
	}
	n := s.poll()
	s.gate.Leave()
	return n
}

// poll is Poll inside the gate.
func (s *Subscriber) poll() int {
	if !s.h.joined && !s.maybeStart() {
		// A publisher's connect is learning where the ring starts: polling
		// now would recover the topic's earlier ticks from the journal (or
		// name them a gap) and join at 1. Nothing was delivered yet, and
		// learnStart's wait is bounded.
		return 0
	}
	if s.h.lat.n >= latencyRun {
		s.h.lat.record(s.rec) // earlier polls' ticks are out: now their latencies
	}
	n := s.reader.Poll(&s.h)
	if n == 0 {
		if s.h.lat.n > 0 {
			s.h.lat.record(s.rec) // idle: whatever is held
		}
		s.h.clock.idled()
	}
	return n
}

// ReadInto copies the next tick into t and its payload into buf; see
// ring.Reader.ReadInto. Its latency is recorded as with Poll. Once Close
// has begun it reads nothing and returns ErrClosed.
func (s *Subscriber) ReadInto(t *ring.Tick, buf []byte) (ok bool, ev ring.Event, err error) {
	if !s.gate.Enter() { // as Poll's
		return false, ring.Event{}, ErrClosed
	}
	ok, ev, err = s.reader.ReadInto(t, buf)
	s.gate.Leave()
	if ok {
		s.rec.Record(s.h.clock.now() - t.PublishNs)
	}
	return ok, ev, err
}

// Run polls until ctx ends or Close is called, through Config.Idle. It
// returns nil when stopped by Close, else ctx's error.
func (s *Subscriber) Run(ctx context.Context) error {
	s.running.Lock()
	defer s.running.Unlock()
	if s.stop.Load() {
		return ErrClosed
	}
	done := make(chan struct{})
	defer close(done)
	var ctxDone atomic.Bool
	go func() {
		select {
		case <-ctx.Done():
			ctxDone.Store(true)
		case <-done:
		}
	}()
	idle := s.cfg.Idle
	for !s.stop.Load() && !ctxDone.Load() {
		idle.Idle(s.Poll())
	}
	if s.stop.Load() {
		return nil
	}
	return ctx.Err()
}
