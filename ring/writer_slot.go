package ring

// slotPoster is a target QP that takes one slot's WRITEs in one call,
// without work requests (rdma/tcp's QP.PostSlot): (busy: an 8-byte WRITE
// of busyWord at dst,) body at dst+8, then an 8-byte WRITE of stamp at
// dst, in that order, as chainSlot's chain of them would be placed; only
// the stamp's may be signalled. An error means nothing was queued: the
// writer then posts the same WRITEs as work requests (chainSlot), whose
// post meets whatever made it decline (a full queue, an ERR state).
type slotPoster interface {
	PostSlot(rkey uint32, dst uint64, body []byte, stamp, busyWord uint64, busy bool, id uint64, signaled bool) error
}

// postSlot writes staged tick i into t's slot through t.sp, counting its
// WRITEs toward SignalEvery as chainWrite does (the tick's last WRITE,
// the stamp, is the one signalled when the count is reached). False: it
// declined, and nothing was posted; no chain may be pending on t (the
// slot would pass it).
func (w *Writer) postSlot(t *target, i int) bool {
	addr := t.base + (w.batchSeqs[i]&t.mask)*t.slotSize
	off := w.stgImages + w.batchOffs[i]*w.stgSlot + offBody
	posts := t.posts + 2
	if t.lossy {
		posts++
	}
	signaled := posts >= w.signal
	if t.sp.PostSlot(t.rkey, addr, w.stg[off:off+int(w.batchLens[i])], w.batchSeqs[i], StampBusy, t.lossy, idWrite, signaled) != nil {
		return false
	}
	if signaled {
		posts = 0
		w.pending++
	}
	t.posts = posts
	return true
}
