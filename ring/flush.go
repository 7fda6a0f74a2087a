package ring

import (
	"errors"

	"github.com/tickbus/tickbus/rdma"
)

// Flush waits until every WRITE this writer posted has completed: it posts
// one signalled 8-byte READ (of the ring's head; of the counter for the
// home) on every QP, which completes only after what was posted before it
// on that QP, and waits for them through the idle strategy, up to Timeout.
// Call it before Close when the last ticks matter: a NIC reads the staging
// memory after PostSend returns, and Close deregisters it. Not on the hot
// path; call it from the publishing goroutine.
func (w *Writer) Flush() error {
	tl, err := w.begin()
	if err != nil {
		return err
	}
	w.claimID += 1 << 8
	w.flushWant, w.flushGot, w.flushErr = 0, 0, nil
	flushOne := func(qp rdma.QueuePair, lkey uint32, addr uint64, rkey uint32) {
		wr := &w.wr
		wr.ID, wr.Op, wr.Flags = w.claimID|idFlush, rdma.OpRead, rdma.FlagSignaled
		wr.Local = rdma.SGE{Addr: w.stgAddr + stgHead, Len: 8, LKey: lkey}
		wr.Remote = rdma.RemoteAddr{Addr: addr, RKey: rkey}
		for {
			err := qp.PostSend(wr)
			if err == nil {
				w.flushWant++
				return
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) || !w.waitCQ() {
				w.flushErr = err
				return
			}
		}
	}
	flushOne(w.homeQP, w.lkey, w.counter.Addr, w.counter.RKey)
	for _, t := range tl.all {
		if !t.dropped {
			flushOne(t.qp, t.lkey, t.base-offSlots+offHot, t.rkey)
		}
	}
	for w.flushGot < w.flushWant {
		if w.reap() > 0 {
			continue
		}
		if w.expired() {
			w.idle.Reset()
			return ErrTimeout
		}
		w.idle.Idle(0)
	}
	w.idle.Reset()
	if w.flushErr != nil {
		return w.flushErr
	}
	return w.broken
}
