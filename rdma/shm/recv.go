package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

var errNilRR = fmt.Errorf("%w: nil receive request", rdma.ErrInvalidRequest)

// PostRecv posts a receive for an incoming SEND (rr.Local: a buffer with
// local write) or WRITE_WITH_IMM (rr.Local may be empty). A bad buffer is
// refused here with rdma.ErrInvalidRequest; more than RecvDepth outstanding
// is rdma.ErrRecvQueueFull. Receives posted in ERR complete with
// StatusFlushed.
func (q *QP) PostRecv(rr *rdma.RecvRequest) error {
	if rr == nil {
		return errNilRR
	}
	q.recvMu.Lock()
	defer q.recvMu.Unlock()
	if q.State() == rdma.QPClosed {
		return errQPClosed
	}
	if rr.Local.Len > 0 {
		if _, ok := q.dev.localAt(rr.Local, rdma.AccessLocalWrite); !ok {
			return fmt.Errorf("%w: receive buffer: unknown lkey, outside its region, or no local write", rdma.ErrInvalidRequest)
		}
	}
	posted := q.recvPosted.Load()
	if posted-q.recvDone.Load() >= q.recvDepth {
		return rdma.ErrRecvQueueFull
	}
	q.recvRing[posted&q.recvMask] = *rr
	atomic.StoreUint32(q.in.view.recvLen(posted), rr.Local.Len) // loaded by the sender's claim
	q.recvPosted.Store(posted + 1)
	atomic.StoreUint64(q.in.view.posted(), posted+1) // the sender's credit; pairs with its load in claim
	return nil
}

// drain turns arrived messages into receive completions in buf, in the
// order the receives were posted. In ERR, receives with no message complete
// with StatusFlushed. RecvCQ poller only.
func (q *QP) drain(buf []rdma.Completion) int {
	n := 0
	v := q.in.view
	for n < len(buf) {
		done := q.recvDone.Load()
		if done == q.recvPosted.Load() { // pairs with PostRecv's store
			break
		}
		rr := &q.recvRing[done&q.recvMask]
		c := rdma.Completion{ID: rr.ID, Op: rdma.OpRecv, QPN: q.num}
		kind, ln, imm, ok := v.message(done)
		switch {
		case !ok:
			if q.State() != rdma.QPError {
				return n
			}
			c.Status = rdma.StatusFlushed
		case kind == kindSend:
			c.Imm = imm
			c.Bytes = ln
			if int(ln) > v.maxSend || ln > rr.Local.Len {
				c.Status = rdma.StatusLocalLength
				break
			}
			if ln > 0 {
				dst, ok := q.dev.localAt(rr.Local, rdma.AccessLocalWrite)
				if !ok {
					c.Status = rdma.StatusLocalProtection
					break
				}
				copy(dst, v.payload(done)[:ln])
			}
		case kind == kindWriteImm:
			c.Op = rdma.OpRecvImm
			c.Imm = imm
			c.Bytes = ln
		case kind == kindTooLong:
			c.Status = rdma.StatusLocalLength
		default: // the peer wrote garbage into the slot
			c.Status = rdma.StatusRemoteOp
		}
		buf[n] = c
		n++
		q.recvDone.Store(done + 1) // the slot is free again; loaded by PostRecv
	}
	return n
}

// flushRecvs completes every outstanding receive with StatusFlushed, into
// the RecvCQ's queue, as far as it has room. Close only, after the QP left
// the RecvCQ's drain list and no poll runs.
func (q *QP) flushRecvs() {
	posted := q.recvPosted.Load()
	for done := q.recvDone.Load(); done < posted; done++ {
		rr := &q.recvRing[done&q.recvMask]
		if q.recvCQ.reserve() != nil {
			q.dev.log.Warn().Uint32("qpn", q.num).Uint64("lost", posted-done).Msg("shm: RecvCQ full; flushed receives dropped")
			break
		}
		q.recvCQ.q.Push(rdma.Completion{ID: rr.ID, Status: rdma.StatusFlushed, Op: rdma.OpRecv, QPN: q.num})
	}
	q.recvDone.Store(posted)
}
