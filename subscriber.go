package tickbus

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
)

// Subscription is one topic's ring in this process: publishers write into
// it directly, and a goroutine of its own polls it and calls the handler,
// in sequence order.
type Subscription struct {
	c    *Client
	s    *subscriber.Subscriber
	h    adapter
	stop context.CancelFunc
	done chan struct{}
	err  error // why polling stopped; set before done is closed

	lockThread bool
	manual     bool // WithManualPoll: the caller polls

	closeOnce sync.Once
	closeErr  error
}

// adapter turns the Handler's method names into subscriber.Handler's.
type adapter struct{ h Handler }

func (a *adapter) OnTicks(ms []ring.Tick) { a.h.OnMessages(ms) }
func (a *adapter) OnEvent(ev ring.Event)  { a.h.OnEvent(ev) }

// Subscribe announces a ring for topic and starts polling it: h gets every
// message of the topic from now on, in sequence order, in batches of
// zero-copy views, and an event for every sequence it does not get (a gap,
// an overrun, a skip, a corrupt slot). Close ends it.
func (c *Client) Subscribe(topic string, h Handler, opts ...SubOption) (*Subscription, error) {
	sub, s, err := c.subscribe(topic, h, opts)
	if err != nil {
		return nil, err
	}
	if sub.manual {
		var once sync.Once
		sub.stop = func() { once.Do(func() { close(sub.done) }) }
		return sub, nil
	}
	runCtx, stop := context.WithCancel(context.Background())
	sub.stop = stop
	go func() {
		if sub.lockThread {
			runtime.LockOSThread()
		}
		err := s.Run(runCtx)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		sub.err = wrap(err)
		close(sub.done)
	}()
	return sub, nil
}

// subscribe makes the subscription; its polling is the caller's.
func (c *Client) subscribe(topic string, h Handler, opts []SubOption) (*Subscription, *subscriber.Subscriber, error) {
	if h == nil {
		return nil, nil, optErr("Subscribe", "nil", "a Handler (tickbus.OnTick, tickbus.HandlerFuncs, or your own)")
	}
	o, err := parseSubOptions("Subscribe", opts)
	if err != nil {
		return nil, nil, err
	}
	ctx, end, err := c.begin()
	if err != nil {
		return nil, nil, err
	}
	defer end()
	sub := &Subscription{c: c, h: adapter{h: h}, done: make(chan struct{}), stop: func() {}, lockThread: o.lockThread, manual: o.manual}
	s, err := subscriber.New(ctx, c.node, c.devs, c.subConfig(topic, &o), &sub.h)
	if err != nil {
		if c.isClosed() {
			return nil, nil, ErrClosed
		}
		return nil, nil, wrap(err)
	}
	sub.s = s
	if err := c.add(nil, sub); err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return sub, s, nil
}

// Poll delivers what is ready in the ring to the handler, on the calling
// goroutine, and returns how much it delivered (messages plus events): feed
// it to an IdleStrategy. Only for a subscription made WithManualPoll (0,
// and nothing delivered, otherwise), from one goroutine at a time. Close
// may come from another goroutine while it polls: Close waits for the Poll
// under way, and every Poll after that returns 0. It allocates nothing,
// takes no lock and makes no syscall.
func (s *Subscription) Poll() int {
	if !s.manual {
		return 0
	}
	return s.s.Poll()
}

// Counters are the subscription's totals: received, and every sequence
// lost by kind.
func (s *Subscription) Counters() Counters { return s.s.Counters() }

// Publishers is how many publishers write into the ring now.
func (s *Subscription) Publishers() int { return s.s.Publishers() }

// Providers names the providers publishers write into the ring through
// now ("shm", "tcp", "shm+tcp"; "" with none).
func (s *Subscription) Providers() string { return s.s.Providers() }

// Topic is the subscription's topic.
func (s *Subscription) Topic() string { return s.s.Topic() }

// Done is closed when polling has stopped (Close, or a failure: Err says).
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why polling stopped: nil after Close, or the failure; nil while
// polling.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Wait blocks until polling stops and returns Err.
func (s *Subscription) Wait() error {
	<-s.done
	return s.err
}

// Close leaves the topic (publishers drop the ring), delivers what is
// already in the ring, publishes the last statistics and releases the
// ring. The handler is not called after Close returns. Safe from any
// goroutine, while another polls. From the handler itself, Close cannot
// wait for the Poll it runs in: it gives up after 5 s with an error,
// leaves the ring mapped, and polling stops (Done) once the handler
// returns. Idempotent.
func (s *Subscription) Close() error {
	err := s.close() // before remove: the client's Close waits for it then, and closes the devices after
	s.c.remove(nil, s)
	return err
}

func (s *Subscription) close() error {
	s.closeOnce.Do(func() {
		s.stop()
		// The subscriber's Close stops Run and waits for its Poll itself,
		// and gives up on a Poll that is its own caller (a handler's
		// Close): waiting for done first would wait for that caller
		// forever.
		err := s.s.Close()
		if !errors.Is(err, subscriber.ErrPollBusy) {
			<-s.done
		}
		s.closeErr = wrap(err)
	})
	return s.closeErr
}

// Run subscribes to topic and polls on the calling goroutine, the Aeron
// way (the caller owns the polling thread; pin it with
// runtime.LockOSThread), until ctx ends or the client is closed. Then it
// closes the subscription (which delivers what is already in the ring)
// and returns nil, or the first error.
func (c *Client) Run(ctx context.Context, topic string, h Handler, opts ...SubOption) error {
	sub, s, err := c.subscribe(topic, h, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.ending:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = s.Run(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	sub.err = wrap(err)
	close(sub.done)
	return errors.Join(sub.err, sub.Close())
}

// parseSubOptions applies opts in order; call names the method for errors.
func parseSubOptions(call string, opts []SubOption) (subOptions, error) {
	var o subOptions
	for _, opt := range opts {
		if opt == nil {
			return o, optErr(call, "nil", "a SubOption")
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// subConfig is the subscriber.Config of a subscription of topic (a topic
// or, for SubscribePattern, a pattern) with options o.
func (c *Client) subConfig(topic string, o *subOptions) subscriber.Config {
	mode := ring.Lossy
	if o.reliable {
		mode = ring.Reliable
	}
	var onStats func(*stats.Message)
	if o.onStats != nil {
		onStats = o.onStats
	}
	return subscriber.Config{Topic: topic, ID: o.id, Slots: o.slots, SlotSize: o.slotSize,
		Mode: mode, GapTimeout: o.gapTimeout, MaxBatch: o.maxBatch, Provider: c.provider(), Idle: o.idle,
		StatsInterval: o.statsInterval, OnStats: onStats, Logger: c.log}
}
