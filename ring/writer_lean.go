package ring

import (
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/internal/tsc"
)

// The lean single-tick publish (Aeron's tryClaim on an exclusive
// publication, in spirit): a solo writer (solo.go) whose journal and
// targets are all mapped (direct.go) claims from its run with plain loads
// and stores and writes the tick straight into each mapped slot. It is the
// general path's own steps, in the same order, written out in one function
// so that nothing is a call but the payload copies and the liveness checks:
//
//	inLimit, room (the cached reliable limit), the home's liveness →
//	soloClaim's busy word,
//	req and counter checks → claimable (lease end, limit) → per ring (a
//	single tick's journal last, a batch's first): Live, (lossy:
//	StampBusy,) header, payload, stamp.
//
// A single tick's journal goes last, where the general path writes it
// first (and leanBatch does, see there): a
// store leaves the store buffer only after every earlier one, so the
// journal's stores, on lines of the home's own that a tick touches once
// a lap and that have gone cold meanwhile, held every subscriber's stamp
// back while they missed (see mappedRings). What the order gives up is
// the journal's copy of a tick whose writer died within the publish: a
// ring the writer had not reached names that sequence a gap, where it
// would have recovered it from the journal, as it names any sequence a
// writer claimed and died before writing; nothing is lost silently
// either way.
//
// Whatever is not the common case (the run is used up, the home shares,
// the counter moved, a reliable ring looks full, completions of generic
// targets wait to be reaped) is left to the general path, before anything
// is claimed.

// leanClaim claims n sequences on the lean path and returns the first.
// claimed false: nothing was claimed; take the general path. claimed true:
// err is nil, ErrFenced (refused by the lease end or the limit, and given
// back to the run: nothing is claimed) or ErrHomeFailed (nothing claimed:
// the home's mapping died, as in directAtomic).
func (w *Writer) leanClaim(tl *targetList, n uint64) (first uint64, claimed bool, err error) {
	c := w.cached
	if !w.soloOn || c+n > w.runEnd || c+n > w.fence.Load() || w.pending > 0 { // pairs with the Store in SetLimit
		return 0, false, nil
	}
	if tl.reliable > 0 && (tl != w.seen || c+n-1 >= w.limit) {
		return 0, false, nil // roomFor's cached limit does not cover the claim
	}
	if !w.hlive.live() { // as directAtomic: a home QP that left RTS breaks the writer
		return w.homeGone()
	}
	next := w.soloNext
	soloStore(next, c|soloBusy)                                         // pairs with Share's Load after its membarrier
	if w.soloReq.Load() != 0 || atomic.LoadUint64(w.dctr) != w.runEnd { // pairs with Share's Swap; the counter: see soloClaim
		soloStore(next, c) // no claim: soloClaim decides (leave, or lost)
		return 0, false, nil
	}
	// claimable, inline, before the claim shows: the lease end (a TSC
	// read while set, once per leaseEvery ticks: see leaseEvery), the
	// limit. A refused claim goes back to the run (the word says c
	// again), so no reader READing the word takes it for claimed and
	// names it a gap: it is the fenced epoch's unused range, or the next
	// claim's.
	if e := w.lease.Load(); e != 0 { // pairs with the Store in SetLeaseEnd
		if g := w.leaseGen.Load(); w.leaseLeft >= n && g == w.leaseSeen { // pairs with SetLeaseEnd's Adds
			w.leaseLeft -= n
		} else if d := w.leaseTSC.Load(); d == 0 || tsc.Read() >= d {
			w.leaseLeft = 0 // near the end (or no TSC deadline yet): every claim reads the clock
			if monoNs() >= e {
				soloStore(next, c)
				return 0, true, ErrFenced
			}
			if d == 0 {
				w.tscLearn(e)
			}
		} else if g&1 == 0 { // not under way in SetLeaseEnd: d is g's deadline or a later one's
			w.leaseLeft, w.leaseSeen = leaseEvery-1, g
		}
	}
	if c+n > w.fence.Load() { // pairs with the Store in SetLimit
		soloStore(next, c)
		return 0, true, ErrFenced
	}
	w.cached = c + n
	soloStore(next, c+n) // pairs with Share's Load
	return c, true, nil
}

// leanTick publishes one tick on the lean path; claimed and err as
// leanClaim's.
func (w *Writer) leanTick(tl *targetList, typ uint16, payload []byte, ns int64) (seq uint64, claimed bool, err error) {
	c, claimed, err := w.leanClaim(tl, 1)
	if !claimed || err != nil {
		return 0, claimed, err
	}
	// newBody and putSlot, inline: the header once, then per ring (the
	// journal last) liveness, (lossy: StampBusy,) header, payload, stamp.
	// (putSlot does not inline: calling it here took BenchmarkPublisher_Publish/single
	// from 38-50 to 48-69 ns in three alternating runs at load 0.4, 17:18;
	// keep the two in step.)
	n := uint32(len(payload))
	b1 := uint64(n) | uint64(typ)<<32
	b2 := uint64(w.pub) | uint64(headerCheck(c, ns, n, typ, 0, w.pub, payload))<<32
	// A slot prefetchAhead on is taken only where no reader can still
	// need it: every reliable ring's reader passed its sequence a lap
	// ago (the cached room, leanClaim's check), and a lossy ring's
	// reader that has not is lapped by then anyway.
	ahead := tl.reliable == 0 || c+prefetchAhead < w.limit
	for _, t := range tl.rings {
		if t.dropped {
			continue
		}
		if !t.journal && !t.live.live() { // the journal: the home's region through the home QP, whose liveness leanClaim checked
			w.drop(t, errDirectGone)
			continue
		}
		off := (c & t.mask) * t.slotSize
		s := t.dmem[off : off+t.slotSize : off+t.slotSize]
		if ahead && !t.journal {
			po := ((c + prefetchAhead) & t.mask) * t.slotSize
			prefetchSlot(&t.dmem[po]) // see prefetchAhead
		}
		h := (*slotHeader)(unsafe.Pointer(&s[0]))
		if t.lossy {
			stampStore(&h.Stamp, StampBusy)
		}
		b := (*[3]uint64)(unsafe.Pointer(&h.PublishNs)) // little endian: the fields' bytes (slotBody)
		// The payload, then the header and the stamp (putSlot, slotOrder).
		putTail(s, payload)
		putHead(s, payload)
		b[0], b[1], b[2] = uint64(ns), b1, b2
		stampStore(&h.Stamp, c) // release; pairs with the reader's load of the stamp
	}
	stampStore(word(&w.stats.published), w.stats.published.Load()+1) // own word; pairs with the Load in Stats
	return c, true, nil
}

// leanBatch publishes ticks (1..MaxBatch of them) on the lean path;
// claimed and err as leanClaim's.
func (w *Writer) leanBatch(tl *targetList, ticks []Tick) (first uint64, claimed bool, err error) {
	c, claimed, err := w.leanClaim(tl, uint64(len(ticks)))
	if !claimed || err != nil {
		return 0, claimed, err
	}
	bodies := w.bodies[:len(ticks)]
	for i := range ticks {
		t := &ticks[i]
		bodies[i] = newBody(c+uint64(i), t.PublishNs, t.Type, t.Flags&FlagsUser, w.pub, t.Payload)
	}
	aheadLimit := ^uint64(0) // as leanTick's: within the cached reliable room
	if tl.reliable > 0 {
		aheadLimit = w.limit
	}
	// Backwards: the journal (last in tl.rings) first, as the general
	// path writes it, unlike leanTick: the journal last was measured to
	// help a single tick's latency, not a batch. Batched throughput did
	// not tell the orders apart (tickbus bench --cases tickbus-shm
	// --scaling=false --duration 1s, eight alternating pairs at load
	// 1-4.5: median 18.6 M ticks/s journal last, 19.0 M first, the same
	// build moving 14.5-27.6 M).
	for i := len(tl.rings) - 1; i >= 0; i-- {
		t := tl.rings[i]
		if t.dropped {
			continue
		}
		if !t.journal && !t.live.live() { // the journal: as in leanTick
			w.drop(t, errDirectGone)
			continue
		}
		a := aheadLimit
		if t.journal {
			a = 0 // no prefetch: see prefetchAhead
		}
		putRun(t, c, bodies, ticks, a)
	}
	stampStore(word(&w.stats.published), w.stats.published.Load()+uint64(len(ticks))) // own word; pairs with the Load in Stats
	return c, true, nil
}

// leaseEvery bounds the ticks the lean path claims per TSC read of the
// lease end: a read costs ~18 ns on this class of VM (RDTSC's own cost,
// more than half of a lean tick), so a single-tick publisher reads it
// once per leaseEvery claims, a batch of leaseEvery or more every claim.
// A read that finds the TSC before the lease's TSC deadline (taken 5%
// early of the time left, leaseclock.go) lets the next leaseEvery-1 ticks
// go unread, unless SetLeaseEnd runs meanwhile (leaseGen moved: the next
// claim reads); past the deadline, near the end, every claim reads the
// clock as before. The window is leaseEvery-1 ticks, not a time: a
// publisher stalled (SIGSTOP, starved) right after a read that admitted
// a claim may, once it runs again past the lease end, write at most that
// many more ticks before a read refuses its next claim (ErrFenced) --
// what one PublishBatch of leaseEvery ticks claimed just before the same
// stall writes with a single check, and what the lease's last quarter
// (SetLeaseEnd) is the margin for. Without a stall, leaseEvery ticks take
// about a microsecond, far inside the 5% margin of the TSC deadline.
const leaseEvery = 16

// prefetchAhead is how far ahead of the slot it writes a single-tick
// lean publish asks for a target ring's slot lines (PREFETCHW,
// prefetchSlot): the fetch of a line the reader's core holds starts
// eight ticks before the stores that need it, instead of when the store
// buffer reaches them (the profile's hottest instruction is the first
// store into the slot, waiting for room in the store buffer). A bare
// loop of the same stores (BenchmarkLadder bare/1ring) has far fewer
// instructions per tick, so the core's own look-ahead reaches more
// slots; six more stores per tick did not slow it (bare+Reader/1ring
// +6stores), so the writer's extra stores are not what Publish loses.
// BenchmarkLadder Publish/journal/pin=1, five alternating rounds at
// load ~1: 11.5 M ticks/s median (9.9-18.2) without, 16.5 M (12.1-20.6)
// with 8, 15.0 M with 4; nojournal 17.9 -> 22.0 M. tickbus bench
// tickbus-shm single, five alternating pairs at load 3.2-3.8: 7.61 M
// median (7.27-8.42) without, 11.4 M (7.74-19.3) with, ahead in 5 of 5.
// Not for the journal (no reader holds its lines; measured no better,
// as in the lead's bare ring). Batches (leanBatch, putRun) prefetch the
// same way: BenchmarkLadder PublishBatch64/journal/pin=1, four
// alternating rounds at load ~2, 12.4 -> 16.1 M ticks/s median
// (nojournal 17.6 -> 20.6 M); across processes the batched figure is
// bound by the subscriber and did not move (tickbus bench, four pairs:
// 20.1 vs 20.4 M median).
const prefetchAhead = 8
