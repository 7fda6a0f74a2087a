package tickbus_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
)

// subscribedPair subscribes h to topic on c and makes a publisher of it
// that sees the subscription.
func subscribedPair(t *testing.T, c *tickbus.Client, topic string, h tickbus.Handler, opts ...tickbus.SubOption) (*tickbus.Subscription, *tickbus.Publisher) {
	t.Helper()
	s, err := c.Subscribe(topic, h, opts...)
	require.NoError(t, err)
	p, err := c.Publisher(topic)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	return s, p
}

// A feed handler that closes its publisher on a signal, from the signal's
// goroutine, while its publishing goroutine is mid-publish: Close unmaps
// the rings a publish writes through, so without the publisher's gate
// this faults (and kills the test binary) in a round or two.
func TestPublisher_CloseFromAnotherGoroutineWhilePublishing_NoFaultThenErrClosed(t *testing.T) {
	c := connect(t)
	for round := range 4 {
		topic := fmt.Sprintf("closepub%d", round)
		var h seqs
		s, p := subscribedPair(t, c, topic, &h)

		var published atomic.Uint64
		done := make(chan error, 1)
		go func() {
			payload := make([]byte, 56)
			for {
				_, err := p.Publish(1, payload)
				switch {
				case err == nil:
					published.Add(1)
				case errors.Is(err, tickbus.ErrBackPressure):
				default:
					done <- err
					return
				}
			}
		}()
		require.Eventually(t, func() bool { return h.len() > 1000 }, 10*time.Second, time.Millisecond)
		require.NoError(t, p.Close(), "Close waits for the publish under way, then closes")
		select {
		case err := <-done:
			require.ErrorIs(t, err, tickbus.ErrClosed, "after Close every publish says closed")
		case <-time.After(10 * time.Second):
			t.Fatal("the publishing goroutine never saw the Close")
		}
		_, err := p.Publish(1, []byte("late"))
		require.ErrorIs(t, err, tickbus.ErrClosed)
		require.NoError(t, s.Close())
		got := s.Counters()
		// The default ring is lossy: a flood overruns it, and says so.
		assert.Equal(t, published.Load(), got.Received+got.Lost()+got.BeforeJoin,
			"every tick a publish returned a sequence for is received or named lost, nothing more: %+v", got)
		assert.Zero(t, got.Gaps+got.Corrupt, "a Close under a publish leaves no torn or missing tick: %+v", got)
	}
}

// A trading engine that polls on its own thread (WithManualPoll) and
// closes the subscription from another goroutine. Without the
// subscriber's gate, Close's drain polls the reader alongside the loop's
// Poll, which the race detector reports (CI's -race stage runs this
// test; without -race the overlap is rare here and the test passes), and
// a Poll still under way when the ring is unmapped would fault. A Poll
// after Close returns 0 with or without the gate (the reader's own closed
// flag), so that check guards against a regression, not the race.
func TestSubscription_CloseFromAnotherGoroutineWhilePolling_NoFaultPollThenReturns0(t *testing.T) {
	c := connect(t)
	for round := range 4 {
		topic := fmt.Sprintf("closesub%d", round)
		var h seqs
		s, p := subscribedPair(t, c, topic, &h, tickbus.WithManualPoll())

		var stop, closed atomic.Bool
		var afterClose atomic.Int64 // what Polls after Close returned delivered
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			for !stop.Load() {
				wasClosed := closed.Load()
				n := s.Poll()
				if wasClosed {
					afterClose.Add(int64(n))
				}
				if n == 0 {
					runtime.Gosched()
				}
			}
		}()
		const n = 2000
		for i := range n {
			for {
				_, err := p.Publish(1, []byte{byte(i)})
				if err == nil {
					break
				}
				require.ErrorIs(t, err, tickbus.ErrBackPressure)
			}
		}
		require.Eventually(t, func() bool { return h.len() > n/2 }, 10*time.Second, time.Millisecond)
		require.NoError(t, s.Close(), "Close waits for the Poll under way, then drains and unmaps")
		closed.Store(true)
		time.Sleep(20 * time.Millisecond) // Polls after Close: each must return 0 and touch nothing
		stop.Store(true)
		<-polled
		assert.Zero(t, afterClose.Load(), "a Poll after Close delivers nothing")
		got := s.Counters()
		assert.Equal(t, uint64(n), got.Received, "the Poll loop and Close's drain together delivered every tick")
		h.mu.Lock()
		for i, seq := range h.got {
			if seq != uint64(i+1) {
				t.Fatalf("delivery %d was sequence %d: the Poll loop and the drain overlapped (each once, in order, wanted)", i, seq)
			}
		}
		assert.Len(t, h.got, n)
		h.mu.Unlock()
		assert.Zero(t, got.Lost())
		require.NoError(t, p.Close())
	}
}

// A handler that closes its own subscription, inside a Poll: Close cannot
// wait for that Poll (it is the caller's own), so after its wait it says
// so and leaves the ring mapped, rather than hang or unmap the ring under
// the handler's caller.
func TestSubscription_CloseFromItsOwnHandler_ErrorNotHangNorFault(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out Close's 5 s bound for a Poll to return")
	}
	c := connect(t)
	var s *tickbus.Subscription
	var closeErr error
	var calls atomic.Int32
	h := tickbus.HandlerFuncs{Messages: func([]tickbus.Message) {
		if calls.Add(1) == 1 {
			closeErr = s.Close()
		}
	}}
	s, p := subscribedPair(t, c, "closeself", h, tickbus.WithManualPoll())
	_, err := p.Publish(1, []byte("x"))
	require.NoError(t, err)
	start := time.Now()
	for deadline := start.Add(20 * time.Second); calls.Load() == 0 && time.Now().Before(deadline); {
		s.Poll()
	}
	require.ErrorIs(t, closeErr, tickbus.ErrPollBusy, "Close inside the handler's Poll cannot drain: it says so")
	assert.Less(t, time.Since(start), 15*time.Second, "bounded, not a hang")
	assert.Zero(t, s.Poll(), "and the subscription polls nothing after")
	_, err = p.Publish(1, []byte("y"))
	require.NoError(t, err, "the publisher goes on (the subscriber is withdrawn from the bus)")
}

// The same under Client.Subscribe's own polling goroutine: Close from the
// handler used to wait for that goroutine (its own caller) forever.
func TestSubscription_CloseFromItsOwnHandlerUnderSubscribe_ErrorThenPollingStops(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out Close's 5 s bound for a Poll to return")
	}
	c := connect(t)
	sc := newSelfCloser()
	s, p := subscribedPair(t, c, "closeselfrun", tickbus.HandlerFuncs{Messages: func([]tickbus.Message) { sc.handle() }})
	sc.start(s.Close)
	_, err := p.Publish(1, []byte("x"))
	require.NoError(t, err)
	sc.check(t, s.Done())
}

// A pattern subscription's handler that closes it, under its own poller:
// as a subscription's, an error after the wait, not a hang; the other
// topic's ring closes, and polling stops once the handler returns.
func TestPatternSubscription_CloseFromItsOwnHandler_ErrorThenPollingStops(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out Close's 5 s bound for a Poll to return")
	}
	c := connect(t)
	sc := newSelfCloser()
	ps, err := c.SubscribePattern("pat.*", tickbus.TopicHandlerFuncs{Messages: func(string, []tickbus.Message) { sc.handle() }})
	require.NoError(t, err)
	sc.start(ps.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := c.Publisher("pat.a")
	require.NoError(t, err)
	b, err := c.Publisher("pat.b")
	require.NoError(t, err)
	require.NoError(t, a.WaitSubscribers(ctx, 1))
	require.NoError(t, b.WaitSubscribers(ctx, 1))
	_, err = a.Publish(1, []byte("x"))
	require.NoError(t, err)
	sc.check(t, ps.Done())
}

// selfCloser is a handler's own Close under its poller: the first
// delivery calls it (once start has named it), and check looks at what it
// gave.
type selfCloser struct {
	close  func() error
	ready  chan struct{}
	closed chan error
	calls  atomic.Int32
}

func newSelfCloser() *selfCloser {
	return &selfCloser{ready: make(chan struct{}), closed: make(chan error, 1)}
}

// start names the Close the handler calls; deliveries wait for it.
func (c *selfCloser) start(f func() error) {
	c.close = f
	close(c.ready)
}

func (c *selfCloser) handle() {
	<-c.ready
	if c.calls.Add(1) == 1 {
		c.closed <- c.close()
	}
}

// check: ErrPollBusy (not a hang), polling stopped (done) once the handler
// returned, and the handler called once.
func (c *selfCloser) check(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case err := <-c.closed:
		require.ErrorIs(t, err, tickbus.ErrPollBusy)
	case <-time.After(30 * time.Second):
		t.Fatal("Close from the handler under its poller hung")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("polling did not stop once the handler returned")
	}
	assert.Equal(t, int32(1), c.calls.Load(), "the handler is not called after its Close")
}
