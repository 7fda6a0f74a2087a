package shm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/swcq"
)

// CQ is a completion queue of a Device. It implements
// rdma.CompletionQueue.
//
// Send completions are pushed into a software queue (swcq) by the posting
// goroutine. Every completion in the queue holds one credit, taken before
// the operation that produces it runs, so the queue never overflows: with no
// credit left, PostSend returns rdma.ErrSendQueueFull and does nothing.
//
// Receive completions are not queued: Poll drains the shared receive queues
// of the QPs that use this CQ as their RecvCQ straight into the caller's
// buffer, so they need no credit.
type CQ struct {
	dev     *Device
	q       *swcq.CQ
	credits atomic.Int64  // free room in q; PostSend takes, Poll gives back
	polling atomic.Uint64 // odd while a Poll runs; control paths wait (waitGen) before unmapping
	recvQPs atomic.Pointer[[]*QP]
	closed  atomic.Bool
	once    sync.Once
}

var _ rdma.CompletionQueue = (*CQ)(nil)

// CreateCQ makes a completion queue of at least depth entries.
func (d *Device) CreateCQ(depth int) (rdma.CompletionQueue, error) {
	if err := d.errIfClosed(); err != nil {
		return nil, err
	}
	if depth < 1 || depth > maxCQDepth {
		return nil, fmt.Errorf("%w: shm CQ depth %d, want 1..%d", rdma.ErrInvalidConfig, depth, maxCQDepth)
	}
	q, err := swcq.New(depth)
	if err != nil {
		return nil, err
	}
	c := &CQ{dev: d, q: q}
	c.credits.Store(int64(q.Cap()))
	c.recvQPs.Store(&[]*QP{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return nil, fmt.Errorf("%w: shm device", rdma.ErrClosed)
	}
	d.cqs[c] = struct{}{}
	return c, nil
}

// reserve takes a credit for one completion. Hot path: one atomic add.
func (c *CQ) reserve() error {
	if c.credits.Add(-1) < 0 {
		c.credits.Add(1)
		if c.closed.Load() {
			return errCQClosed
		}
		return rdma.ErrSendQueueFull
	}
	return nil
}

func (c *CQ) unreserve() { c.credits.Add(1) }

// Poll fills buf with up to len(buf) completions and returns how many: first
// queued send completions, then arrived receives. It never blocks, takes no
// lock and allocates nothing. One goroutine polls a CQ at a time.
func (c *CQ) Poll(buf []rdma.Completion) int {
	// Odd while inside: Close and unmapping paths wait for it to move on
	// (waitGen). Entering is an atomic add, a full fence, so the loads
	// below cannot pass it; leaving is a release store (one poller at a
	// time, as swcq requires, so nobody else moves polling meanwhile).
	g := c.polling.Add(1)
	n := 0
	if !c.closed.Load() {
		n = c.q.Poll(buf)
		if n > 0 {
			c.credits.Add(int64(n))
			qps := *c.dev.qps.Load()
			// Every queued completion of a live QP is a send completion
			// (receives are drained straight into buf below; the only
			// queued receive completions are the flushes of QP.Close, which
			// first takes the QP out of the table).
			for i := range buf[:n] {
				if qpn := buf[i].QPN; int(qpn) < len(qps) {
					if q := qps[qpn]; q != nil && q.sendCQ == c {
						q.retire()
					}
				}
			}
		}
		for _, q := range *c.recvQPs.Load() {
			if n == len(buf) {
				break
			}
			n += q.drain(buf[n:])
		}
	}
	release.Store64(word64(&c.polling), g+1)
	return n
}

func (c *CQ) waitIdle() { waitGen(&c.polling) }

// addRecvQP and removeRecvQP change the drain list (copy on write, under
// dev.mu).
func (c *CQ) addRecvQP(q *QP) {
	old := *c.recvQPs.Load()
	l := make([]*QP, 0, len(old)+1)
	l = append(append(l, old...), q)
	c.recvQPs.Store(&l)
}

func (c *CQ) removeRecvQP(q *QP) {
	old := *c.recvQPs.Load()
	l := make([]*QP, 0, len(old))
	for _, x := range old {
		if x != q {
			l = append(l, x)
		}
	}
	c.recvQPs.Store(&l)
}

// Close releases the CQ: Poll returns 0 from now on and posts that need a
// completion fail with rdma.ErrClosed. Close it after the QPs that use it.
// Idempotent.
func (c *CQ) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.dev.mu.Lock()
		delete(c.dev.cqs, c)
		c.dev.mu.Unlock()
		c.waitIdle()
		_ = c.q.Close()
	})
	return nil
}
