package ring

// Undelivered counts the ticks the ring holds more than a lap past the
// reader's position, whole (their check, payload included, passes), which it has not
// delivered and Poll cannot reach, and gives the lowest and highest of
// their sequences. Close calls it after
// its drain: a tick still here is one a writer put in this ring and the
// reader never handed out (above all a newer epoch's, written before its
// home record reached the reader, which then cannot place it), so it is
// counted as lost rather than left behind in silence. Polling goroutine
// only, off the hot path: it reads every slot's header.
func (r *Reader) Undelivered() (n, from, to uint64) {
	for off := 0; off+r.slotSize <= len(r.slots); off += r.slotSize {
		stamp := stampAt(r.slots, off).Load() // pairs with the writer's stamp WRITE
		if stamp < r.next || stamp == StampBusy || stamp-r.next <= r.mask {
			continue // delivered, being written, or within the lap Poll reaches (a writer still finishing)
		}
		if !slotWhole(r.slots[off:off+r.slotSize], stamp) {
			continue // torn or not a tick: nothing to count
		}
		if n == 0 || stamp < from {
			from = stamp
		}
		to = max(to, stamp)
		n++
	}
	return n, from, to
}
