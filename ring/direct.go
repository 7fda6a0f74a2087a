package ring

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/rdma"
)

// The direct path (Aeron's tryClaim, in spirit). Where a queue pair hands
// the writer its peer's memory (rdma.DirectMapper: shm, whose atomics are
// CPU atomics on the mapped memory, AtomicGlobal), the writer skips the
// work requests and completions of the generic path:
//
//   - the claim is one CPU CAS (or FAA) on the mapped home counter, inside
//     Writer.atomic, so claimRoom's fencing (inLimit before, fenced after,
//     the CAS-loss fallback) is the generic path's own, and FenceCounter's
//     FETCH_AND_ADD through a QP (a CPU atomic on the same word on shm)
//     stops it as it stops every claim;
//   - the write, per target, is (lossy: a release store of StampBusy,) the
//     header (built once per tick, three word stores) and the payload
//     copied from the caller's bytes (Publish, PublishBatch; the staging
//     image only where the generic path staged the tick), then a release
//     store of the stamp (stampStore: a plain MOV on amd64,
//     membarrier.StoreRelease): the order the shm provider keeps for the same
//     WRITEs.
//
// A mapping stays valid until the writer releases it, whatever the peer or
// the QP does (the provider holds it for the DirectMap). Before each
// publish writes a target, DirectMap.Live checks that the QP is still in
// RTS and the peer still gives it the ring; if not, the target is dropped
// as on an error completion (the home's: the writer breaks, ErrHomeFailed).
// A target removed while a publish runs may still be written by it (as on
// the generic path): its mapping is released only by the publishing
// goroutine, at the start of a later publish (begin), or by Close.

// errDirectGone is what a dropped direct target is reported with.
// It wraps rdma.ErrCompletion, as the error completion a WRITE through the
// QP would have got, and rdma.ErrQPState.
var errDirectGone = fmt.Errorf("%w (%w): target QP left RTS or its peer withdrew the ring", rdma.ErrCompletion, rdma.ErrQPState)

// mapDirect maps n bytes at addr of region rkey through qp, with need, if
// qp maps its peer directly and the range is 8-byte aligned in this
// process. nil, nil means: use the generic path.
func mapDirect(qp rdma.QueuePair, rkey uint32, addr, n uint64, need rdma.Access) (rdma.DirectMap, []byte, error) {
	dmr, ok := qp.(rdma.DirectMapper)
	if !ok {
		return nil, nil, nil
	}
	dm, err := dmr.Direct(rdma.RemoteRegion{Addr: addr, RKey: rkey, Len: n}, need)
	if err != nil {
		return nil, nil, err
	}
	b := dm.Bytes()
	if uint64(len(b)) != n || uintptr(unsafe.Pointer(&b[0]))&7 != 0 {
		_ = dm.Close()
		return nil, nil, nil
	}
	return dm, b, nil
}

// mapHome maps the home's counter (and journal) for direct claims; on any
// failure the writer claims through the home QP. Before the writer is
// shared.
func (w *Writer) mapHome(cfg *WriterConfig) {
	if cfg.Generic || cfg.Device.Caps().Atomic != rdma.AtomicGlobal {
		return
	}
	h := cfg.Home
	dm, b, err := mapDirect(cfg.HomeQP, h.Region.RKey, h.CounterAddr(), 8, rdma.AccessRemoteAtomic)
	if dm == nil {
		if err != nil {
			w.log.Debug().Err(err).Msg("ring: home counter not mapped; claims go through the home QP")
		}
		return
	}
	if j := w.journal; j != nil {
		jm, jb, err := mapDirect(cfg.HomeQP, j.rkey, j.base, j.slots*j.slotSize, rdma.AccessRemoteWrite)
		if jm == nil {
			_ = dm.Close()
			w.log.Debug().Err(err).Msg("ring: journal not mapped; claims go through the home QP")
			return
		}
		j.dm, j.dmem = jm, jb
		j.live = newLiveness(jm)
	}
	w.dhome, w.dctr = dm, (*uint64)(unsafe.Pointer(&b[0]))
	w.hlive = newLiveness(dm)
}

// mapTarget maps t's ring for direct writes if the writer is direct and
// t's QP maps its peer; otherwise t stays on the generic path. Under mu.
func (w *Writer) mapTarget(t *target) {
	if !w.direct {
		return
	}
	dm, b, err := mapDirect(t.qp, t.rkey, t.base, t.slots*t.slotSize, rdma.AccessRemoteWrite)
	if dm == nil {
		if err != nil {
			w.log.Debug().Uint64("target", t.id).Err(err).Msg("ring: target not mapped; written through its QP")
		}
		return
	}
	t.dm, t.dmem = dm, b
	t.live = newLiveness(dm)
	if !t.lossy {
		// The head word too, for the room check of a ring that looks full
		// (readHead): a load instead of a READ and its completion.
		hm, hb, err := mapDirect(t.qp, t.rkey, t.base-offSlots+offHot, 8, rdma.AccessRemoteRead)
		if hm == nil {
			if err != nil {
				w.log.Debug().Uint64("target", t.id).Err(err).Msg("ring: target head not mapped; READ through its QP")
			}
			return
		}
		t.hm, t.dhead = hm, (*uint64)(unsafe.Pointer(&hb[0]))
	}
}

// directAtomic is atomic on the mapped counter: one CPU CAS or FAA.
func (w *Writer) directAtomic(op rdma.Opcode, compare, swap, add uint64) (uint64, error) {
	if !w.hlive.live() {
		_, _, err := w.homeGone()
		return 0, err
	}
	var orig uint64
	if op == rdma.OpFetchAndAdd {
		orig = atomic.AddUint64(w.dctr, add) - add
	} else {
		for {
			orig = atomic.LoadUint64(w.dctr)
			if orig != compare || atomic.CompareAndSwapUint64(w.dctr, orig, swap) {
				break
			}
		}
	}
	if w.pending > 0 {
		w.reapSome()
	}
	return orig, nil
}

// homeGone breaks the writer: the home's QP left RTS (or its peer
// withdrew the region).
func (w *Writer) homeGone() (uint64, bool, error) {
	w.broken = ErrHomeFailed
	if j := w.journal; j != nil {
		j.dropped = true
	}
	return 0, true, ErrHomeFailed
}

// reapSome drains the CQs when signalled WRITEs of generic targets pile
// up, now and then, as the generic claim does.
func (w *Writer) reapSome() {
	if tl := w.targets.Load(); w.pending > 2*len(tl.cqs) { // pairs with the Store in AddTarget/RemoveTarget
		w.reap()
	}
}

// directLive reports whether t (mapped) may be written; if not it drops t.
func (w *Writer) directLive(t *target) bool {
	if t.live.live() {
		return true
	}
	w.drop(t, errDirectGone)
	return false
}

// liveCounter is implemented by a provider's direct maps (rdma/shm) whose
// Live can turn false only after the counter returned moves: the provider
// adds to it after every change that can end a mapping's liveness (its QP
// leaving RTS, its peer withdrawing a region), whichever mapping it ends.
type liveCounter interface{ LiveCounter() *atomic.Uint64 }

// liveness is a DirectMap's Live behind its provider's counter: while the
// counter has not moved since Live last said yes, the answer stands, and
// a tick costs a load instead of an interface call (two calls per tick
// and one per extra subscriber on the lean path: ~18% of a single-tick
// Publish in its profile). A change lands in the counter after the state
// or table Live reads, so a load that sees the new value sees the change
// (Go atomics are sequentially consistent); one that does not is the same
// as a Live call just before the change: the publish under way writes,
// the next one drops. Publishing goroutine only.
type liveness struct {
	dm   rdma.DirectMap
	ctr  *atomic.Uint64 // nil: Live every time
	seen uint64         // ctr when Live last said yes; ^0 before
}

func newLiveness(dm rdma.DirectMap) liveness {
	l := liveness{dm: dm, seen: ^uint64(0)}
	if lc, ok := dm.(liveCounter); ok {
		l.ctr = lc.LiveCounter()
	}
	return l
}

// live is dm.Live(), from the counter while it stands.
func (l *liveness) live() bool {
	if l.ctr != nil && l.ctr.Load() == l.seen { // pairs with the provider's Add after a change
		return true
	}
	return l.check()
}

func (l *liveness) check() bool {
	if l.ctr == nil {
		return l.dm.Live()
	}
	v := l.ctr.Load() // before Live: a change after this load moves the counter again
	if !l.dm.Live() {
		return false
	}
	l.seen = v
	return true
}

// directSlot writes staged tick i into t's mapped slot: (lossy: StampBusy,)
// body, stamp, each stamp a release store.
func (w *Writer) directSlot(t *target, i int) {
	seq := w.batchSeqs[i]
	off := (seq & t.mask) * t.slotSize
	s := t.dmem[off : off+t.slotSize : off+t.slotSize]
	stamp := (*uint64)(unsafe.Pointer(&s[0]))
	if t.lossy {
		stampStore(stamp, StampBusy)
	}
	n := uint64(w.batchLens[i])
	img := w.stgImages + w.batchOffs[i]*w.stgSlot + offBody
	copy(s[offBody:offBody+n], w.stg[img:img+int(n)])
	stampStore(stamp, seq)
}

// releaseRetired releases the mappings of removed targets. Publishing
// goroutine (no publish runs), with mu held.
func (w *Writer) releaseRetired() {
	for _, dm := range w.retired {
		_ = dm.Close()
	}
	w.retired = w.retired[:0]
	w.retire.Store(false)
}

// hdrLen is a slot header without its stamp.
const hdrLen = SlotHeaderSize - offBody

// allDirect reports whether claims are direct and the journal (if any) and
// every target of ts are mapped. Under mu, or before the writer is shared.
func (w *Writer) allDirect(ts []*target) bool {
	if w.dctr == nil || (w.journal != nil && w.journal.dm == nil) {
		return false
	}
	for _, t := range ts {
		if t.dm == nil {
			return false
		}
	}
	return true
}

// slotBody is a slot's header after its stamp (bytes 8..31) as the three
// little-endian words a direct write stores: built once per tick in
// registers from whole words (narrow stores read back as wide loads
// would stall store forwarding), stored into every target's slot.
type slotBody struct {
	ns       uint64 // PublishNs
	lenTypFl uint64 // Len | Type<<32 | Flags<<48
	pubCheck uint64 // Publisher | Check<<32
}

var (
	_ [hdrLen - unsafe.Sizeof(slotBody{})]byte
	_ [unsafe.Sizeof(slotBody{}) - hdrLen]byte
	_ [unsafe.Offsetof(slotHeader{}.Len) - offBody - 8]byte
	_ [unsafe.Offsetof(slotHeader{}.Publisher) - offBody - 16]byte
)

// newBody is the header of tick seq after its stamp, its check covering
// payload.
func newBody(seq uint64, ns int64, typ, flags uint16, pub uint32, payload []byte) slotBody {
	n := uint32(len(payload))
	return slotBody{ns: uint64(ns), lenTypFl: uint64(n) | uint64(typ)<<32 | uint64(flags)<<48,
		pubCheck: uint64(pub) | uint64(headerCheck(seq, ns, n, typ, flags, pub, payload))<<32}
}

// mappedRings is ts and then the journal (if any), if allDirect(ts);
// else nil. Under mu, or before the writer is shared. leanTick writes
// them in this order (leanBatch backwards): the journal last, so that
// its stores, which miss (a journal slot's lines are touched once a lap,
// by the home only), are not ahead of the subscribers' stamps in the
// store buffer. BenchmarkPingPong every=50µs/slot=96/journal (in process,
// reliable rings, spin), three alternating pairs at load ~4: round trip
// p50 698, 1029, 992 ns journal first against 755, 673, 695 journal
// last, where the same rings without a journal took 478-751 ns in both
// builds: the journal had cost about 250-300 ns a round trip.
func (w *Writer) mappedRings(ts []*target) []*target {
	if !w.allDirect(ts) {
		return nil
	}
	rs := make([]*target, 0, len(ts)+1)
	rs = append(rs, ts...)
	if w.journal != nil {
		rs = append(rs, w.journal)
	}
	return rs
}

// directTick writes one tick straight into the journal and every target
// of tl (all mapped): the header is built once, and each target gets
// (lossy: StampBusy,) header, payload and stamp in its slot: one copy of
// the payload per target and no image. Reliable targets have room (the
// caller checked).
func (w *Writer) directTick(tl *targetList, seq uint64, body *slotBody, payload []byte) {
	if j := w.journal; j != nil && !j.dropped && w.directLive(j) {
		putSlot(j, seq, body, payload)
	}
	for _, t := range tl.all {
		if !t.dropped && w.directLive(t) {
			putSlot(t, seq, body, payload)
		}
	}
}

// putSlot writes a tick into t's mapped slot for seq: (lossy: StampBusy,)
// body, payload, stamp; each stamp a release store (stampStore), paired
// with the reader's atomic load of the stamp. payload fits the slot
// (AddTarget checked the ring's slots against MaxPayload).
func putSlot(t *target, seq uint64, body *slotBody, payload []byte) {
	off := (seq & t.mask) * t.slotSize
	s := t.dmem[off : off+t.slotSize : off+t.slotSize]
	h := (*slotHeader)(unsafe.Pointer(&s[0]))
	if t.lossy {
		stampStore(&h.Stamp, StampBusy)
	}
	b := (*[3]uint64)(unsafe.Pointer(&h.PublishNs)) // little endian: the fields' bytes (layout.go)
	// The payload first, then the header and the stamp: the stamp's
	// line's stores leave the store buffer back to back, so a reader
	// polling the stamp cannot take the line between the header and the
	// stamp while a later line is fetched (slotOrder).
	putTail(s, payload)
	putHead(s, payload)
	b[0], b[1], b[2] = body.ns, body.lenTypFl, body.pubCheck
	stampStore(&h.Stamp, seq)
}

// slotOrder: a direct write stores a slot's payload (putTail, then
// putHead), then its header's three words, then the stamp. A slot is a
// multiple of 32 bytes, so it starts on a cache line or half way into
// one. On a line: the header and the payload's first 32 bytes share the
// stamp's line, stored back to back last; the rest goes first. Half way
// (a 96-byte slot at an odd index): the header alone is the second half of
// a line whose first half is the previous slot's tail, and the payload
// starts on the next line, all of it stored before the header. Either way
// the stamp's line is the last one touched, and touched once.

// slotLine0 is how much payload shares a slot's first 64 bytes with the
// stamp and header (the stamp's cache line, for a slot that starts on a
// line; slotOrder).
const slotLine0 = 64 - SlotHeaderSize

// putHead copies p's first slotLine0 bytes into slot s (after the header). A payload that fills it (every tick of 32 bytes or
// more) is four word loads and stores, inlined, not a second
// runtime.memmove call beside the later lines' (a call per ring per tick
// is what each extra subscriber costs; a fixed-size array copy is a
// memmove call too, as the compiler cannot rule out overlap). Word loads,
// not 16-byte ones: a payload a feed has just encoded with word stores
// may still be in the store buffer (behind the previous tick's slot
// stores, waiting for their lines), and a load that spans two stores
// cannot be forwarded from it. (The tail's 16-byte moves, putTail, load
// what memmove loaded before.)
func putHead(s, p []byte) {
	if len(p) < slotLine0 {
		copy(s[SlotHeaderSize:], p)
		return
	}
	le := binary.LittleEndian
	d := (*[slotLine0 / 8]uint64)(unsafe.Pointer(&s[SlotHeaderSize])) // 8-aligned; a slot is at least 64 bytes (MinSlotSize)
	_ = p[slotLine0-1]
	d[0], d[1], d[2], d[3] = le.Uint64(p), le.Uint64(p[8:]), le.Uint64(p[16:]), le.Uint64(p[24:]) // little endian: the bytes as they are
}

// putTail copies the part of p after its first slotLine0 bytes into slot
// s (from the slot's byte 64 on; s holds SlotHeaderSize+len(p) bytes). A tail of 24
// or 32 bytes (a tick of 56 bytes has 24, the bench's 64-byte message 32)
// is 16- and 8-byte moves (MOVUPS, MOVQ), inlined, instead of a
// runtime.memmove call that spilled the caller's registers around it once
// per ring per tick; slice-to-array conversions keep them bounds-checked
// (and checkptr-clean: no pointer past a short p is made). Anything else
// is one copy.
func putTail(s, p []byte) {
	switch len(p) - slotLine0 {
	case 32: // two 16-byte moves (a [32]byte copy is a memmove call), bounds-checked array conversions
		*(*[16]byte)(s[64:80]) = *(*[16]byte)(p[slotLine0:48])
		*(*[16]byte)(s[80:96]) = *(*[16]byte)(p[48:64])
	case 24:
		*(*[16]byte)(s[64:80]) = *(*[16]byte)(p[slotLine0:48])
		*(*[8]byte)(s[80:88]) = *(*[8]byte)(p[48:56])
	default:
		if len(p) > slotLine0 {
			copy(s[64:], p[slotLine0:])
		}
	}
}

// directBatch is directTick for the consecutive sequences first.. of
// ticks: the headers once, then per target every tick, slot after slot.
func (w *Writer) directBatch(tl *targetList, first uint64, ticks []Tick) {
	bodies := w.bodies[:len(ticks)]
	for i := range ticks {
		t := &ticks[i]
		bodies[i] = newBody(first+uint64(i), t.PublishNs, t.Type, t.Flags&FlagsUser, w.pub, t.Payload)
	}
	if j := w.journal; j != nil && !j.dropped && w.directLive(j) {
		putRun(j, first, bodies, ticks, 0)
	}
	for _, t := range tl.all {
		if !t.dropped && w.directLive(t) {
			putRun(t, first, bodies, ticks, 0)
		}
	}
}

// putRun is putSlot for ticks at first.., bodies their headers, written
// out (putSlot is too big to be inlined). It prefetches the slot
// prefetchAhead on of each sequence whose slot that is below ahead (0:
// none).
func putRun(t *target, first uint64, bodies []slotBody, ticks []Tick, ahead uint64) {
	bodies = bodies[:len(ticks)]
	for i := range ticks {
		seq := first + uint64(i)
		off := (seq & t.mask) * t.slotSize
		s := t.dmem[off : off+t.slotSize : off+t.slotSize]
		if seq+prefetchAhead < ahead {
			prefetchSlot(&t.dmem[((seq+prefetchAhead)&t.mask)*t.slotSize]) // see prefetchAhead
		}
		h := (*slotHeader)(unsafe.Pointer(&s[0]))
		if t.lossy {
			stampStore(&h.Stamp, StampBusy)
		}
		b := (*[3]uint64)(unsafe.Pointer(&h.PublishNs)) // little endian: the fields' bytes (slotBody)
		p := ticks[i].Payload
		putTail(s, p) // the payload first, as putSlot (slotOrder)
		putHead(s, p)
		b[0], b[1], b[2] = bodies[i].ns, bodies[i].lenTypFl, bodies[i].pubCheck
		stampStore(&h.Stamp, seq) // release; pairs with the reader's load of the stamp
	}
}
