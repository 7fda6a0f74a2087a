package tickbus

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
)

// TopicHandler receives what a pattern subscription delivers, told the
// topic, on its polling goroutine: OnMessages once per batch of one
// topic's consecutive messages (the views die when it returns), OnEvent
// for every range of one topic's sequences not delivered. Each topic keeps
// its own sequence and its own events.
type TopicHandler interface {
	OnMessages(topic string, msgs []Message)
	OnEvent(topic string, ev Event)
}

// TopicHandlerFuncs is a TopicHandler of two functions; a nil one ignores
// what it would get (events are still counted).
type TopicHandlerFuncs struct {
	Messages func(topic string, msgs []Message)
	Events   func(topic string, ev Event)
}

// OnMessages calls h.Messages.
func (h TopicHandlerFuncs) OnMessages(topic string, msgs []Message) {
	if h.Messages != nil {
		h.Messages(topic, msgs)
	}
}

// OnEvent calls h.Events.
func (h TopicHandlerFuncs) OnEvent(topic string, ev Event) {
	if h.Events != nil {
		h.Events(topic, ev)
	}
}

// topicAdapter turns TopicHandler's method names into subscriber.TopicHandler's.
type topicAdapter struct{ h TopicHandler }

func (a *topicAdapter) OnTicks(topic string, ms []ring.Tick) { a.h.OnMessages(topic, ms) }
func (a *topicAdapter) OnEvent(topic string, ev ring.Event)  { a.h.OnEvent(topic, ev) }

// PatternSubscription is a subscription to every topic that matches a
// pattern of dotted tokens, present and future: "md.nasdaq.>" (every topic
// below md.nasdaq), "md.*.itch" (one token in the middle). Each matching
// topic gets a ring of its own in this process; one goroutine polls them
// all.
type PatternSubscription struct {
	c    *Client
	w    *subscriber.Wildcard
	h    topicAdapter
	stop context.CancelFunc
	done chan struct{}
	err  error // why polling stopped; set before done is closed

	manual bool

	closeOnce sync.Once
	closeErr  error
}

// SubscribePattern subscribes to every topic matching pattern (a plain
// topic works too) with the same options as Subscribe, each option applied
// to every topic's ring. h is told the topic of everything it gets.
func (c *Client) SubscribePattern(pattern string, h TopicHandler, opts ...SubOption) (*PatternSubscription, error) {
	if h == nil {
		return nil, optErr("SubscribePattern", "nil", "a TopicHandler (tickbus.TopicHandlerFuncs, or your own)")
	}
	o, err := parseSubOptions("SubscribePattern", opts)
	if err != nil {
		return nil, err
	}
	_, end, err := c.begin() // the watch's own context lives until Close
	if err != nil {
		return nil, err
	}
	defer end()
	ps := &PatternSubscription{c: c, h: topicAdapter{h: h}, done: make(chan struct{}), stop: func() {}, manual: o.manual}
	// The watch for future topics lives until Close; each topic's set-up is
	// bounded by the subscriber's own connect timeout.
	watchCtx, endWatch := context.WithCancel(context.Background())
	w, err := subscriber.NewWildcard(watchCtx, c.node, c.devs, c.subConfig(pattern, &o), &ps.h)
	if err != nil {
		endWatch()
		return nil, wrap(err)
	}
	ps.w = w
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		endWatch()
		_ = w.Close()
		return nil, ErrClosed
	}
	c.pats[ps] = struct{}{}
	c.mu.Unlock()
	if ps.manual {
		var once sync.Once
		ps.stop = func() { once.Do(func() { endWatch(); close(ps.done) }) }
		return ps, nil
	}
	runCtx, stop := context.WithCancel(context.Background())
	ps.stop = func() { stop(); endWatch() }
	go func() {
		if o.lockThread {
			runtime.LockOSThread()
		}
		err := w.Run(runCtx)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		ps.err = wrap(err)
		close(ps.done)
	}()
	return ps, nil
}

// Poll polls every matching topic's ring once on the calling goroutine and
// returns how much it delivered. Only for a subscription made
// WithManualPoll (0 otherwise), from one goroutine at a time; after Close
// (from any goroutine, as Subscription.Poll's) it returns 0. It allocates
// nothing and takes no lock.
func (s *PatternSubscription) Poll() int {
	if !s.manual {
		return 0
	}
	return s.w.Poll()
}

// Topics lists the topics subscribed so far, sorted.
func (s *PatternSubscription) Topics() []string { return s.w.Topics() }

// Counters sums every topic's totals.
func (s *PatternSubscription) Counters() Counters { return s.w.Counters() }

// TopicCounters are one topic's totals, and false if the pattern has not
// subscribed to it.
func (s *PatternSubscription) TopicCounters(topic string) (Counters, bool) {
	sub := s.w.Subscriber(topic)
	if sub == nil {
		return Counters{}, false
	}
	return sub.Counters(), true
}

// Done is closed when polling has stopped (Close, or a failure: Err says).
func (s *PatternSubscription) Done() <-chan struct{} { return s.done }

// Err is why polling stopped, or the last error subscribing to a newly
// found topic; nil if neither.
func (s *PatternSubscription) Err() error {
	select {
	case <-s.done:
		if s.err != nil {
			return s.err
		}
	default:
	}
	return wrap(s.w.Err())
}

// Close leaves every topic (each ring delivers what it already holds) and
// stops watching for new ones. The handler is not called after Close
// returns. Safe from any goroutine; from the handler itself, as
// Subscription.Close: ErrPollBusy after 5 s, polling stops once the
// handler returns. Idempotent.
func (s *PatternSubscription) Close() error {
	err := s.close() // before the delete: the client's Close waits for it then, and closes the devices after
	s.c.mu.Lock()
	delete(s.c.pats, s)
	s.c.mu.Unlock()
	return err
}

func (s *PatternSubscription) close() error {
	s.closeOnce.Do(func() {
		s.stop()
		// As Subscription's: the Wildcard's Close stops Run and waits for
		// each topic's Poll, and gives up on one that is its own caller.
		err := s.w.Close()
		if !errors.Is(err, subscriber.ErrPollBusy) {
			<-s.done
		}
		s.closeErr = wrap(err)
	})
	return s.closeErr
}
