package bus

import "sync"

// eventQueue runs callbacks one at a time, in order, on its own goroutine,
// so that NATS handlers never wait for user code and user code may call back
// into the bus.
type eventQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	q      []func()
	closed bool
	done   chan struct{}
}

func newEventQueue() *eventQueue {
	e := &eventQueue{done: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	go e.run()
	return e
}

func (e *eventQueue) push(f func()) {
	e.mu.Lock()
	if !e.closed {
		e.q = append(e.q, f)
		e.cond.Signal()
	}
	e.mu.Unlock()
}

func (e *eventQueue) run() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.q) == 0 && !e.closed {
			e.cond.Wait()
		}
		if e.closed {
			e.q = nil
			e.mu.Unlock()
			return
		}
		f := e.q[0]
		e.q[0] = nil
		e.q = e.q[1:]
		e.mu.Unlock()
		f()
	}
}

// close drops what is queued; a callback already running finishes. It does
// not wait, so a callback may close its own handle.
func (e *eventQueue) close() {
	e.mu.Lock()
	e.closed = true
	e.cond.Broadcast()
	e.mu.Unlock()
}
