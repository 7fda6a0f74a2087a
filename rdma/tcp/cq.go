package tcp

import (
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/swcq"
)

// CQ is a completion queue of a tcp Device. It implements
// rdma.CompletionQueue.
//
// Every completion in the queue holds a credit, taken before the request (or
// receive) that produces it is queued, so the queue never overflows: with no
// credit left PostSend returns rdma.ErrSendQueueFull and PostRecv
// rdma.ErrRecvQueueFull, and nothing is queued.
//
// Polling a send completion also retires, as in verbs, the send-queue
// entries of its QP up to the request it completes: a request occupies its
// QP's send queue from PostSend until a completion at or after it is polled.
type CQ struct {
	dev     *Device
	q       *swcq.CQ
	_       [64]byte
	credits atomic.Int64 // free room in q: posters take, Poll gives back
	_       [56]byte
	// stash is how many credits a QP may hold for its next posts (QP.reserve):
	// a 64th of the queue, at most 64, so a QP's idle stash never starves
	// another QP of the CQ for long.
	stash int
}

var _ rdma.CompletionQueue = (*CQ)(nil)

// reserve takes a credit. One atomic add when there is room.
func (c *CQ) reserve() bool {
	if c.credits.Add(-1) < 0 {
		c.credits.Add(1)
		return false
	}
	return true
}

func (c *CQ) unreserve() { c.credits.Add(1) }

// take takes n credits at once, or none when fewer are free (the caller
// then reserves one by one). One atomic add when there is room.
func (c *CQ) take(n int) int {
	if c.credits.Add(int64(-n)) < 0 {
		c.credits.Add(int64(n))
		return 0
	}
	return n
}

// give gives back n credits.
func (c *CQ) give(n int) { c.credits.Add(int64(n)) }

// push queues a completion whose credit was reserved.
func (c *CQ) push(cp rdma.Completion) { c.q.Push(cp) }

// Poll fills buf with up to len(buf) completions and returns how many. It
// never blocks, takes no lock and allocates nothing. One goroutine polls a
// CQ at a time.
func (c *CQ) Poll(buf []rdma.Completion) int {
	n := c.q.Poll(buf)
	if n == 0 {
		return 0
	}
	c.credits.Add(int64(n))
	qps := *c.dev.qpTable.Load()
	for i := range buf[:n] {
		cp := &buf[i]
		if cp.Op == rdma.OpRecv || cp.Op == rdma.OpRecvImm {
			continue
		}
		if q := qps[cp.QPN]; q != nil && q.scq == c {
			q.retire()
		}
	}
	return n
}

// Close marks the CQ closed. Close it after the QPs that use it.
// Idempotent.
func (c *CQ) Close() error { return c.q.Close() }
