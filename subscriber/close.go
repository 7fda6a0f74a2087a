package subscriber

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Close withdraws the subscription (publishers stop writing and drop their
// queue pairs), stops Run and every later Poll, waits for a Poll under way
// on another goroutine to return, drains what the ring already holds to
// the handler, publishes the last stats, closes the queue pairs and unmaps
// the ring. A Poll that does not return within closeWait (a handler that
// blocks, or that called Close itself) keeps the ring: Close then leaves
// it and its queue pairs mapped (unmapping them under the Poll would
// fault), drains nothing, and says so in its error. Idempotent.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		s.learnTailAtClose() // before the withdrawal: every sequence below the counter was claimed while subscribed
		errs = append(errs, s.sub.Close())
		s.mu.Lock()
		s.closing = true // a connect or home record served from now on starts nothing (spawn)
		s.mu.Unlock()
		close(s.done)
		s.wg.Wait()
		s.stop.Store(true)
		if !s.gate.Shut(closeWait) { // before running: a handler under Run that calls Close holds it
			err := fmt.Errorf("%w within %v (a handler that blocks, or that calls Close); the ring and its queue pairs are left mapped (unmapping them under it would fault) and nothing was drained", ErrPollBusy, closeWait)
			s.log.Error().Err(err).Msg("subscriber: close")
			close(s.stopStats)
			<-s.statsDone
			s.closeErr = errors.Join(append(errs, err)...)
			return
		}
		s.running.Lock() // Run has returned
		s.drain()
		n, from, to := s.reader.Undelivered()
		if n > 0 {
			s.undelivered.Store(n)
			s.log.Warn().Uint64("ticks", n).Uint64("from", from).Uint64("to", to).
				Msg("subscriber: closed with ticks in the ring it could not deliver (a newer epoch's, before its home record came); counted as lost")
		}
		s.nameTail(from, n)
		s.h.lat.record(s.rec) // before the last stats
		close(s.stopStats)
		<-s.statsDone
		if s.cfg.StatsInterval > 0 {
			s.publishStats() // the last interval, totals final
		}
		s.mu.Lock()
		s.closed = true
		qps := s.qps
		s.qps = map[string][]conn{}
		s.mu.Unlock()
		for _, cs := range qps {
			for _, c := range cs {
				errs = append(errs, c.qp.Close(), c.cq.Close())
			}
		}
		errs = append(errs, s.also.Close())
		final := s.Counters()
		s.final.Store(&final)
		errs = append(errs, s.ring.Close())
		s.mu.Lock()
		extra := s.journalQPs
		s.journalQPs = nil
		s.mu.Unlock()
		for _, qp := range extra {
			errs = append(errs, qp.Close())
		}
		errs = append(errs, s.cq.Close())
		s.running.Unlock()
		s.closeErr = errors.Join(errs...)
		s.log.Info().Uint64("received", s.Counters().Received).Msg("subscriber: closed")
	})
	return s.closeErr
}

// closeWait bounds how long Close waits for a Poll under way to return.
const closeWait = 5 * time.Second

// drain polls until nothing arrived for DrainQuiet, at most 2 s. The quiet
// period outlasts the gap timeout, so a claimed sequence that will never be
// written is reported as a gap rather than left behind in silence.
func (s *Subscriber) drain() {
	end := time.Now().Add(2 * time.Second)
	last := time.Now()
	for now := last; now.Before(end) && now.Sub(last) < s.cfg.DrainQuiet; now = time.Now() {
		if s.reader.Poll(&s.h) > 0 {
			last = now
			continue
		}
		runtime.Gosched() // not a sleep: the reader's gap check runs every 64th empty poll
	}
}
