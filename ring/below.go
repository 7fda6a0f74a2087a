package ring

import "time"

// below watches the sequences under a start that StartAt moved a held
// reader to (WatchBelow): the polling goroutine only.
type below struct {
	from, to uint64   // the window: sequences from..to-1, one ring at most
	at       uint64   // the next one to look at
	until    int64    // monoNs after which the watch ends, after one last look
	left     uint64   // slots the last look has still to read (0: not begun)
	seen     []uint64 // bit s-from: s landed and was counted
}

// belowChunk is how many stamps one idle check reads for the watch: a
// window of a whole ring is looked over in slots/belowChunk idle checks,
// and a tick arriving meanwhile waits for a chunk at most.
const belowChunk = 256

// WatchBelow has the reader count the ticks that land below its start
// after StartAt moved it there, for d: sequences from (at most one ring)
// up to the start that were not in the ring when the start was chosen
// (FirstWritten found none of them), and which a writer lands afterwards.
// Such a tick was claimed before the start and was still on its way (a
// writer's WRITE in flight, a publish under way when it added the ring):
// the reader has passed its sequence and cannot deliver it in order, so
// it is counted (ReaderStats.BelowStart), not lost in silence. It looks on
// the idle path, belowChunk stamps per idle check, and over the whole
// window once more after d; a tick whose slot a later lap reused before
// the reader looked is not seen. Call it from the polling goroutine,
// after StartAt; a later call replaces the watch; from at or above the
// start, or d of 0, ends it.
func (r *Reader) WatchBelow(from uint64, d time.Duration) {
	to := r.next
	if from >= to || d <= 0 {
		r.below = nil
		return
	}
	if to-from > r.mask+1 {
		from = to - (r.mask + 1) // older sequences share the window's slots
	}
	r.below = &below{from: from, to: to, at: from, until: monoNs() + int64(d), seen: make([]uint64, (to-from+63)/64)}
}

// watchBelow reads the next chunk of the watch's window and counts what
// landed. Once the watch is due to end it reads the whole window once
// more, chunk by chunk (a ring of millions of slots is no stall for the
// poll loop), then ends.
func (r *Reader) watchBelow(now int64) {
	b := r.below
	if b.left == 0 && now >= b.until {
		b.left = b.to - b.from
	}
	n := uint64(belowChunk)
	if b.left != 0 {
		n = min(n, b.left)
		b.left -= n
		if b.left == 0 {
			r.below = nil // after this chunk
		}
	}
	for ; n > 0; n-- {
		s := b.at
		if b.at++; b.at == b.to {
			b.at = b.from
		}
		i := s - b.from
		if b.seen[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		// Exactly s: its slot holds no other sequence of the window, and
		// a later lap's tick is not s landing.
		if stampAt(r.slots, int(s&r.mask)*r.slotSize).Load() == s { // pairs with the writer's stamp WRITE
			b.seen[i/64] |= 1 << (i % 64)
			r.stats.belowStart.Add(1)
		}
	}
}
