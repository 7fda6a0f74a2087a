package tcp

import (
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

var errBadRecvSGE = fmt.Errorf("%w: receive SGE is not inside a local-write region of this device", rdma.ErrInvalidRequest)

// PostRecv queues a receive for the peer's next SEND or WRITE_WITH_IMM. It
// may be called from RESET on, never blocks and allocates nothing; the SGE
// is checked now and again when a SEND fills it (its region may be gone). In ERR the receive completes with
// StatusFlushed. rdma.ErrRecvQueueFull: RecvDepth receives are posted, or
// the recv CQ has no room for another completion. rdma.ErrInvalidRequest: the
// SGE is not inside a region of this device that grants local write.
func (q *QP) PostRecv(rr *rdma.RecvRequest) error {
	if rr == nil {
		return rdma.ErrInvalidRequest
	}
	spinAcquire(&q.recvBusy)
	err := q.postRecv(rr)
	postDone(&q.recvBusy)
	return err
}

func (q *QP) postRecv(rr *rdma.RecvRequest) error {
	if rdma.QPState(q.state.Load()) == rdma.QPClosed {
		return rdma.ErrClosed
	}
	if rr.Local.Len > 0 && q.checkLocal(rr.Local, rdma.AccessLocalWrite, rr.Local.Len) != rdma.StatusSuccess {
		return errBadRecvSGE
	}
	pos := q.rqPosted.Load() // only this goroutine stores it
	if pos-q.rqConsumed.Load() >= q.rqDepth {
		return rdma.ErrRecvQueueFull
	}
	if !q.rcq.reserve() { // the receive's completion has room in the recv CQ
		return rdma.ErrRecvQueueFull
	}
	q.rq[pos&q.rqMask] = *rr
	q.rqPosted.Store(pos + 1) // pairs with the responder's Load in takeRecv
	switch rdma.QPState(q.state.Load()) {
	case rdma.QPError, rdma.QPClosed:
		q.drainRecv() // fail or Close may have drained before our Store
	}
	return nil
}
