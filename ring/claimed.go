package ring

// SetClaimed tells the reader that every sequence below c was claimed:
// the topic's counter, as its owner learnt it from the home (a READ or a
// question over the control plane) or from the record a closing home left.
// A tail the reader never got (a publisher stopped writing to this ring,
// and nobody writes after it) leaves nothing later in the ring for the gap
// check to find; with c above the reader's position the gap check waits
// for next..c-1 as for any hole, and names what has not come within the
// gap timeout with one EventGap (after what the journal recovers). Late
// ticks of that range are never delivered once it is named, so nothing is
// counted twice. Only ever raises the bound; a c at or above FenceAdd, or
// above the newest reservation the reader knows, or given while the reader
// still awaits its first epoch, is ignored, as the journal's counter READ
// is; a gap it armed is judged again if an epoch start inside it is
// learnt meanwhile. Safe from any goroutine.
func (r *Reader) SetClaimed(c uint64) {
	for {
		old := r.claimed.Load()
		if c <= old || r.claimed.CompareAndSwap(old, c) { // pairs with the Load in claimedLimit
			return
		}
	}
}

// Claimed is the bound SetClaimed gave (0: none).
func (r *Reader) Claimed() uint64 { return r.claimed.Load() }

// ClaimedTail is what of SetClaimed's bound the reader has neither
// delivered nor named, judged as its gap check judges it: end is 0 when
// the bound is not believable (see claimedLimit) or not ahead; else
// next..end-1 are claimed and missing, and an epoch start the reader
// knows inside that range or at its end (epoch, else 0) splits off
// next..epoch-1, the ended epoch's unused range, which is no loss. For Close, after the
// polling goroutine stopped.
func (r *Reader) ClaimedTail() (next, epoch, end uint64) {
	next, end = r.next, r.claimedLimit()
	if end == 0 {
		return next, 0, 0
	}
	if es := r.epochAbove(next); es > next && es <= end {
		epoch = es
	}
	return next, epoch, end
}

// claimedLimit is the gap check's end when nothing later is in the ring:
// the claimed bound, if it is ahead of the reader and believable; else 0.
func (r *Reader) claimedLimit() uint64 {
	c := r.claimed.Load() // pairs with the CAS in SetClaimed
	if c <= r.next || c >= FenceAdd {
		return 0
	}
	// bound 1: the reader awaits its first epoch (AwaitEpoch), so it
	// cannot tell this epoch's counter from a newer one's
	if b := r.bound.Load(); b == 1 || (b > 1 && c > b) {
		return 0
	}
	return c
}
