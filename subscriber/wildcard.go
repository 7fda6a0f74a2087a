package subscriber

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// TopicHandler receives what one topic of a Wildcard delivers, told the
// topic, on the polling goroutine. Views in ticks die when OnTicks
// returns.
type TopicHandler interface {
	OnTicks(topic string, ticks []ring.Tick)
	OnEvent(topic string, ev ring.Event)
}

// topicHandler adapts a TopicHandler to one topic's Handler.
type topicHandler struct {
	topic string
	h     TopicHandler
}

func (t topicHandler) OnTicks(ts []ring.Tick) { t.h.OnTicks(t.topic, ts) }
func (t topicHandler) OnEvent(ev ring.Event)  { t.h.OnEvent(t.topic, ev) }

// Wildcard subscribes to every topic that matches a pattern ("md.nasdaq.>",
// "md.*.itch"), present and future: it watches the topics the bus hears
// of, and for each matching topic that has a publisher it runs one
// Subscriber, so each topic keeps its own ring, sequence, counters and
// events. Poll (or Run) polls them all from one goroutine; the rest is
// safe from any.
type Wildcard struct {
	pat  bus.Pattern
	cfg  Config
	node Node
	devs *link.Devices
	h    TopicHandler
	ctx  context.Context

	subs atomic.Pointer[[]*Subscriber] // copy on write: Poll reads it without a lock

	mu      sync.Mutex // topics, subscribing, closed
	topics  map[string]*Subscriber
	closed  bool
	lastErr error

	stop      atomic.Bool
	running   sync.Mutex // held by Run; Close waits on it
	done      chan struct{}
	watchDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// DiscoverEvery is how often a Wildcard looks for new matching topics.
const DiscoverEvery = 50 * time.Millisecond

// NewWildcard subscribes to every topic matching cfg.Topic, a pattern (a
// plain topic works too), with cfg for each topic's Subscriber. h may not
// be nil. ctx bounds each subscription's set-up, and the watch ends when
// it ends or at Close.
func NewWildcard(ctx context.Context, node Node, devs *link.Devices, cfg Config, h TopicHandler) (*Wildcard, error) {
	if isNil(node) || devs == nil || h == nil {
		return nil, fmt.Errorf("%w: node, devices and handler are required", ErrInvalidConfig)
	}
	pat, err := bus.ParsePattern(cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("%w: Topic: %w", ErrInvalidConfig, err)
	}
	probe := cfg
	probe.Topic = "probe"
	if err := probe.setDefaults(); err != nil { // every other field, checked once
		return nil, err
	}
	w := &Wildcard{pat: pat, cfg: cfg, node: node, devs: devs, h: h, ctx: ctx, topics: map[string]*Subscriber{},
		done: make(chan struct{}), watchDone: make(chan struct{})}
	w.subs.Store(&[]*Subscriber{})
	if !pat.Wild() {
		if err := w.add(cfg.Topic); err != nil {
			return nil, err
		}
		close(w.watchDone)
		return w, nil
	}
	w.discover()
	go w.watch()
	return w, nil
}

func (w *Wildcard) watch() {
	defer close(w.watchDone)
	t := time.NewTicker(DiscoverEvery)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.ctx.Done():
			return
		case <-t.C:
			w.discover()
		}
	}
}

// discover subscribes to every matching topic with a publisher that has
// no subscriber yet. A failure is kept (Err) and retried next time.
func (w *Wildcard) discover() {
	for _, ti := range w.node.Topics() {
		if len(ti.Publishers) == 0 || !w.pat.Match(ti.Topic) {
			continue
		}
		w.mu.Lock()
		_, have := w.topics[ti.Topic]
		w.mu.Unlock()
		if have {
			continue
		}
		if err := w.add(ti.Topic); err != nil && !errors.Is(err, ErrClosed) {
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
			w.cfg.Logger.Warn().Err(err).Str("topic", ti.Topic).Msg("subscriber: wildcard could not subscribe; will retry")
		}
	}
}

func (w *Wildcard) add(topic string) error {
	cfg := w.cfg
	cfg.Topic = topic
	s, err := New(w.ctx, w.node, w.devs, cfg, topicHandler{topic: topic, h: w.h})
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errors.Join(ErrClosed, s.Close())
	}
	w.topics[topic] = s
	next := append(append([]*Subscriber{}, *w.subs.Load()...), s)
	w.subs.Store(&next) // pairs with the Load in Poll
	w.mu.Unlock()
	w.cfg.Logger.Info().Str("pattern", w.pat.String()).Str("topic", topic).Msg("subscriber: wildcard subscribed to a topic")
	return nil
}

// Poll polls every topic's ring once and returns how much was delivered.
// It allocates nothing and takes no lock.
func (w *Wildcard) Poll() int {
	n := 0
	for _, s := range *w.subs.Load() {
		n += s.Poll()
	}
	return n
}

// Run polls until ctx ends or Close is called, through Config.Idle. It
// returns nil when stopped by Close, else ctx's error.
func (w *Wildcard) Run(ctx context.Context) error {
	w.running.Lock()
	defer w.running.Unlock()
	if w.stop.Load() {
		return ErrClosed
	}
	var ctxDone atomic.Bool
	stopWatch := context.AfterFunc(ctx, func() { ctxDone.Store(true) })
	defer stopWatch()
	idle := w.cfg.Idle
	if idle == nil {
		idle = rdma.NewBackoff()
	}
	for !w.stop.Load() && !ctxDone.Load() {
		idle.Idle(w.Poll())
	}
	if w.stop.Load() {
		return nil
	}
	return ctx.Err()
}

// Topics lists the topics subscribed, sorted.
func (w *Wildcard) Topics() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.topics))
	for t := range w.topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Subscriber is the subscriber of one topic, or nil.
func (w *Wildcard) Subscriber(topic string) *Subscriber {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.topics[topic]
}

// Counters sums every topic's counters (Rate too).
func (w *Wildcard) Counters() Counters {
	var sum Counters
	for _, s := range *w.subs.Load() {
		c := s.Counters()
		sum.Received += c.Received
		sum.Gaps += c.Gaps
		sum.Overruns += c.Overruns
		sum.Skips += c.Skips
		sum.Corrupt += c.Corrupt
		sum.Recovered += c.Recovered
		sum.BeforeJoin += c.BeforeJoin
		sum.Rate += c.Rate
	}
	return sum
}

// Err is the last error subscribing to a discovered topic (nil if none).
func (w *Wildcard) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Close stops watching, stops Run, and closes every topic's subscriber
// (each drains its ring to the handler). A Poll on another goroutine may
// overlap it: each subscriber's Close waits for that Poll's turn in its
// ring (Subscriber.Close), and every Poll after it delivers nothing. From
// the handler itself, the Close of the topic whose Poll it runs in gives
// up after its wait (ErrPollBusy, in the error); the others close, and
// Run stops once the handler returns. Idempotent.
func (w *Wildcard) Close() error {
	w.closeOnce.Do(func() {
		close(w.done)
		<-w.watchDone
		w.stop.Store(true) // Run stops at its next turn
		w.mu.Lock()
		w.closed = true
		subs := *w.subs.Load()
		w.mu.Unlock()
		var errs []error
		for _, s := range subs {
			errs = append(errs, s.Close()) // each waits for its own Poll under way
		}
		w.closeErr = errors.Join(errs...)
		if !errors.Is(w.closeErr, ErrPollBusy) {
			w.running.Lock() // Run has returned (not when it runs this Close: it returns once the handler does)
			w.running.Unlock()
		}
	})
	return w.closeErr
}
