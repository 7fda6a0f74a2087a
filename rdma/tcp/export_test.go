package tcp

import "sync/atomic"

// Outstanding is how many posted requests the peer has not answered yet,
// for tests.
func (q *QP) Outstanding() uint64 { return atomic.LoadUint64(&q.posted) - q.consumed.Load() }

// SendIndex is where the next post lands in the QP's send buffer.
func (q *QP) SendIndex() uint64 { return q.tx.w & q.tx.mask }

// SendDrained reports whether the flusher has written everything posted.
func (q *QP) SendDrained() bool { return q.tx.rpos.Load() == q.tx.wpos.Load() }
