package ring

import (
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

// Hot path. Per tick: one claim (a CAS or FAA through the home QP, whose
// completion is polled), then per target — the journal first, then every
// subscriber ring — two WRITEs (reliable: body, then stamp) or three (lossy:
// StampBusy, body, stamp), all on the target's one QP, which places them in
// order. The stamp WRITE is an aligned 8-byte WRITE: a single store on shm,
// one PCIe/RDMA write of 8 aligned bytes on a NIC. A target's WRITEs of one
// publish go to its QP as one chain (rdma.BatchPoster, one post call on shm
// and verbs; one PostSend each elsewhere). No allocation, lock, syscall or
// log; errors are sentinels.

// Publish claims the next sequence and writes one tick (payload copied) into
// the journal and every target. It returns the sequence.
//
// Errors: ErrPayloadTooLarge, ErrBackPressure (see its doc: seq is 0 if
// nothing was claimed), ErrTimeout, ErrHomeFailed, ErrClosed. A target
// whose QP fails is dropped (OnTargetDropped) and is not an error here.
func (w *Writer) Publish(typ uint16, payload []byte, publishNs int64) (uint64, error) {
	if len(payload) > w.maxPayload {
		return 0, ErrPayloadTooLarge
	}
	tl := w.ready()
	if tl == nil {
		var err error
		if tl, err = w.beginSlow(); err != nil {
			return 0, err
		}
	}
	if tl.direct {
		if seq, claimed, err := w.leanTick(tl, typ, payload, publishNs); claimed {
			return seq, err
		}
	}
	if !w.inLimit(w.cached, 1) {
		return 0, ErrFenced // before the room: a fenced writer must fail over, not wait
	}
	if tl.reliable > 0 && !w.waitRoom(tl, w.cached) {
		w.unstick(tl, w.cached)
		w.stats.backPressure.Add(1)
		return 0, ErrBackPressure
	}
	seq, err := w.claimRoom(tl, 1)
	if err != nil {
		if err == ErrBackPressure {
			w.stats.backPressure.Add(1)
		}
		return 0, err
	}
	if tl.direct && (tl.reliable == 0 || w.roomFor(tl, seq)) {
		body := newBody(seq, publishNs, typ, 0, w.pub, payload)
		w.directTick(tl, seq, &body, payload)
		addOwn(&w.stats.published, 1)
		return seq, nil
	}
	w.stage(0, seq, typ, 0, payload, publishNs)
	err = w.deliver(tl, 1)
	addOwn(&w.stats.published, 1)
	return seq, err
}

// PublishBatch claims len(ticks) consecutive sequences at once and writes
// them in order; Seq and Publisher of the ticks are ignored, Flags keeps
// only FlagsUser bits. It returns the first sequence. An empty batch claims
// nothing and returns 0, nil. Errors as Publish, plus ErrBatchTooLarge.
func (w *Writer) PublishBatch(ticks []Tick) (uint64, error) {
	n := len(ticks)
	if n == 0 {
		return 0, nil
	}
	if n > w.maxBatch {
		return 0, ErrBatchTooLarge
	}
	for i := range ticks {
		if len(ticks[i].Payload) > w.maxPayload {
			return 0, ErrPayloadTooLarge
		}
	}
	tl := w.ready()
	if tl == nil {
		var err error
		if tl, err = w.beginSlow(); err != nil {
			return 0, err
		}
	}
	if tl.direct {
		if first, claimed, err := w.leanBatch(tl, ticks); claimed {
			return first, err
		}
	}
	if !w.inLimit(w.cached, uint64(n)) {
		return 0, ErrFenced // before the room: a fenced writer must fail over, not wait
	}
	if tl.reliable > 0 && !w.waitRoom(tl, w.cached+uint64(n)-1) {
		w.unstick(tl, w.cached)
		w.stats.backPressure.Add(1)
		return 0, ErrBackPressure
	}
	first, err := w.claimRoom(tl, uint64(n))
	if err != nil {
		if err == ErrBackPressure {
			w.stats.backPressure.Add(1)
		}
		return 0, err
	}
	if tl.direct && (tl.reliable == 0 || w.roomFor(tl, first+uint64(n)-1)) {
		w.directBatch(tl, first, ticks)
		addOwn(&w.stats.published, uint64(n))
		return first, nil
	}
	w.stageRun(n)
	for i := range ticks {
		t := &ticks[i]
		w.stage(i, first+uint64(i), t.Type, t.Flags&FlagsUser, t.Payload, t.PublishNs)
	}
	err = w.deliver(tl, n)
	addOwn(&w.stats.published, uint64(n))
	return first, err
}

// PublishAt publishes a tick at exactly sequence seq: A/B line arbitration
// in one CAS (counter: seq → seq+1). The first line to get there wins and
// gets seq back; the other gets ErrLost and nothing is written. If the
// counter is behind seq (this line is ahead), PublishAt waits up to
// ArbitrationWindow for the other line to fill the sequences in between,
// then claims them too and publishes one skip slot for them (readers see
// EventSkip) before the tick. ErrInvalidConfig for seq 0 or past MaxSkip
// ahead of the counter.
func (w *Writer) PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error) {
	if len(payload) > w.maxPayload {
		return 0, ErrPayloadTooLarge
	}
	if seq == 0 || seq >= StampBusy-1 {
		return 0, ErrInvalidSequence
	}
	tl, err := w.begin()
	if err != nil {
		return 0, err
	}
	if !w.claimable(seq, 1) {
		return 0, ErrFenced // before the room and the claim, as in Publish
	}
	if w.soloOn {
		w.soloLeave() // arbitration needs the exact counter
	}
	if tl.reliable > 0 && !w.waitRoom(tl, seq) {
		w.stats.backPressure.Add(1)
		return 0, ErrBackPressure
	}
	var since int64
	for {
		orig, err := w.atomic(rdma.OpCompareAndSwap, seq, seq+1, 0)
		if err != nil {
			return 0, err
		}
		if orig == seq {
			if seq+1 > w.cached {
				w.cached = seq + 1
			}
			if !w.claimable(seq, 1) {
				w.giveBack(seq, 1)
				return 0, ErrFenced // won, but the epoch may have ended since the check above
			}
			w.stage(0, seq, typ, 0, payload, publishNs)
			err = w.deliver(tl, 1)
			addOwn(&w.stats.published, 1)
			return seq, err
		}
		if orig > seq {
			if orig > w.cached {
				w.cached = orig
			}
			w.stats.lost.Add(1)
			return 0, ErrLost
		}
		// The counter is behind: this line is ahead of the topic.
		if seq-orig > MaxSkip {
			return 0, ErrInvalidSequence
		}
		if w.arbNs > 0 {
			now := monoNs()
			if since == 0 {
				since = now
			}
			if now-since < w.arbNs {
				w.idle.Idle(0)
				continue
			}
			w.idle.Reset()
		}
		got, err := w.atomic(rdma.OpCompareAndSwap, orig, seq+1, 0)
		if err != nil {
			return 0, err
		}
		if got != orig {
			continue // the counter moved: decide again
		}
		w.cached = seq + 1
		binary.LittleEndian.PutUint64(w.skipBuf[:], seq-1)
		w.stage(0, orig, 0, FlagSkip, w.skipBuf[:], publishNs)
		w.stage(1, seq, typ, 0, payload, publishNs)
		err = w.deliver(tl, 2)
		w.stats.skipped.Add(seq - orig)
		addOwn(&w.stats.published, 1)
		return seq, err
	}
}

// begin starts a publish: it checks the writer is usable and loads the
// target list; anything unusual is beginSlow's.
func (w *Writer) begin() (*targetList, error) {
	if tl := w.ready(); tl != nil {
		return tl, nil
	}
	return w.beginSlow()
}

// ready is begin's common case, inlined into Publish and PublishBatch (a
// call in it, as begin has, put it over the inlining budget): the target
// list (never nil: NewWriter stores one) of a usable writer with nothing
// to sweep, or nil: call beginSlow.
func (w *Writer) ready() *targetList {
	if w.closed.Load() || w.broken != nil || w.sweep || w.retire.Load() { // pairs with the Stores in Close and removeLocked
		return nil
	}
	w.deadline = 0
	return w.targets.Load() // pairs with the Store in AddTarget/RemoveTarget
}

// beginSlow is begin for a closed or broken writer, or one with dropped
// targets to remove or mappings to release.
func (w *Writer) beginSlow() (*targetList, error) {
	if w.closed.Load() { // pairs with the Store in Close
		return nil, ErrClosed
	}
	if w.broken != nil {
		return nil, w.broken
	}
	if (w.sweep || w.retire.Load()) && w.mu.TryLock() { // pairs with the Store in removeLocked
		if w.sweep {
			w.sweep = false
			for _, t := range w.targets.Load().all {
				if t.dropped {
					w.removeLocked(t.id, t)
				}
			}
		}
		w.releaseRetired()
		w.mu.Unlock()
	}
	w.deadline = 0
	return w.targets.Load(), nil // pairs with the Store in AddTarget/RemoveTarget
}

// stage copies tick i of this publish into the next staging slot (image:
// StampBusy, header, payload) and the slot's stamp source.
func (w *Writer) stage(i int, seq uint64, typ, flags uint16, payload []byte, ns int64) {
	idx := int(w.stgIdx & (w.stgN - 1))
	w.stgIdx++
	off := w.stgImages + idx*w.stgSlot
	b := w.stg[off : off+SlotHeaderSize+len(payload)]
	binary.LittleEndian.PutUint64(b, StampBusy)
	putBody(b[offBody:], seq, ns, uint32(len(payload)), typ, flags, w.pub, payload)
	copy(b[SlotHeaderSize:], payload)
	binary.LittleEndian.PutUint64(w.stg[stgStamps+8*idx:], seq)
	w.batchOffs[i] = idx
	w.batchLens[i] = uint32(SlotHeaderSize - offBody + len(payload))
	w.batchSeqs[i] = seq
}

// stageRun makes the next n staging slots contiguous (no wrap), so a run
// of them can be one WRITE.
func (w *Writer) stageRun(n int) {
	if int(w.stgIdx&(w.stgN-1))+n > int(w.stgN) {
		w.stgIdx = (w.stgIdx + w.stgN - 1) &^ (w.stgN - 1)
	}
}

// deliver writes the n staged ticks to the journal, then to every target.
// A reliable target gets only the ticks it has room for by the deadline.
func (w *Writer) deliver(tl *targetList, n int) error {
	if j := w.journal; j != nil && !j.dropped {
		w.writeAll(j, n)
	}
	last := w.batchSeqs[n-1]
	var err error
	short := tl.reliable > 0 && !w.roomFor(tl, last) && !w.waitRoom(tl, last)
	for _, t := range tl.all {
		if t.dropped {
			continue
		}
		if short && t.cell != nil {
			limit := t.position() + t.slots
			for i := 0; i < n; i++ {
				if w.batchSeqs[i] >= limit {
					err = ErrBackPressure
				} else if !w.writeSlot(t, i) {
					break
				}
			}
			continue
		}
		w.writeAll(t, n)
	}
	// No reap here: the next claim's wait drains the CQs, and a full send
	// queue makes post reap.
	if err != nil {
		w.stats.backPressure.Add(1)
	}
	return err
}

// writeAll writes the n staged ticks into t: runs of consecutive
// sequences in consecutive slots (of the staging's stride) in one body
// WRITE each, the rest slot by slot; all of it as one chain.
func (w *Writer) writeAll(t *target, n int) {
	if t.dmem != nil {
		if w.directLive(t) {
			for i := 0; i < n; i++ {
				w.directSlot(t, i)
			}
		}
		return
	}
	for i := 0; i < n; {
		k := 1
		if w.bulk && t.slotSize == uint64(w.stgSlot) {
			room := int(t.slots - w.batchSeqs[i]&t.mask) // slots before the ring wraps
			for i+k < n && k < room && w.batchSeqs[i+k] == w.batchSeqs[i]+uint64(k) && w.batchOffs[i+k] == w.batchOffs[i]+k {
				k++
			}
		}
		if k == 1 {
			if t.sp == nil || w.nchain > 0 || !w.postSlot(t, i) {
				w.chainSlot(t, i)
			}
		} else {
			w.chainRun(t, i, k)
		}
		i += k
	}
	w.postChain(t)
}

// writeSlot writes staged tick i into t's slot.
func (w *Writer) writeSlot(t *target, i int) bool {
	if t.dmem != nil {
		if !w.directLive(t) {
			return false
		}
		w.directSlot(t, i)
		return true
	}
	if t.sp != nil && w.postSlot(t, i) {
		return true
	}
	w.chainSlot(t, i)
	return w.postChain(t)
}

// chainSlot chains the WRITEs of staged tick i into t's slot: (lossy:
// StampBusy,) body, stamp.
func (w *Writer) chainSlot(t *target, i int) {
	addr := t.base + (w.batchSeqs[i]&t.mask)*t.slotSize
	img := w.stgAddr + uint64(w.stgImages+w.batchOffs[i]*w.stgSlot)
	if t.lossy {
		w.chainWrite(t, w.stgAddr+stgBusy, 8, addr)
	}
	w.chainWrite(t, img+offBody, w.batchLens[i], addr+offBody)
	w.chainWrite(t, w.stgAddr+uint64(stgStamps+8*w.batchOffs[i]), 8, addr)
}

// chainRun chains the WRITEs of staged ticks i..i+k-1, consecutive in
// sequence, in the staging and in t's ring: (lossy: StampBusy into each
// slot,) one WRITE of all the bodies — it covers the stamps of slots 2..k
// with the images' StampBusy, which no reader takes for a sequence — then
// each stamp, in order. k+1 WRITEs instead of 2k (lossy: 2k+1 instead of
// 3k).
func (w *Writer) chainRun(t *target, i, k int) {
	addr := t.base + (w.batchSeqs[i]&t.mask)*t.slotSize
	if t.lossy {
		for j := 0; j < k; j++ {
			w.chainWrite(t, w.stgAddr+stgBusy, 8, addr+uint64(j)*t.slotSize)
		}
	}
	img := w.stgAddr + uint64(w.stgImages+w.batchOffs[i]*w.stgSlot)
	w.chainWrite(t, img+offBody, uint32((k-1)*w.stgSlot)+w.batchLens[i+k-1], addr+offBody)
	stamps := w.stgAddr + uint64(stgStamps+8*w.batchOffs[i])
	for j := 0; j < k; j++ {
		w.chainWrite(t, stamps+uint64(8*j), 8, addr+uint64(j)*t.slotSize)
	}
}

// chainWrite appends a WRITE of n bytes at local address src to remote
// address dst of t to the chain; one in SignalEvery per target is
// signalled.
func (w *Writer) chainWrite(t *target, src uint64, n uint32, dst uint64) {
	wr := &w.chain[w.nchain]
	w.nchain++
	wr.ID, wr.Op, wr.Flags = idWrite, rdma.OpWrite, 0
	wr.Local = rdma.SGE{Addr: src, Len: n, LKey: t.lkey}
	wr.Remote = rdma.RemoteAddr{Addr: dst, RKey: t.rkey}
	if t.posts++; t.posts >= w.signal {
		t.posts = 0
		wr.Flags = rdma.FlagSignaled
	}
}

// postChain posts the chain to t's QP, in order, and empties it. A full
// send queue (or CQ) makes it reap and post the rest; any other failure,
// or no room by the deadline, drops t and returns false.
func (w *Writer) postChain(t *target) bool {
	wrs := w.chain[:w.nchain]
	w.nchain = 0
	for len(wrs) > 0 {
		var n int
		var err error
		if t.bp != nil {
			n, err = t.bp.PostSendBatch(wrs)
		} else {
			n, err = rdma.PostEach(t.qp, wrs)
		}
		for i := range wrs[:n] {
			if wrs[i].Flags != 0 {
				w.pending++
			}
		}
		wrs = wrs[n:]
		if err == nil {
			return true
		}
		if !errors.Is(err, rdma.ErrSendQueueFull) {
			w.drop(t, err)
			return false
		}
		if !w.waitCQ() {
			w.drop(t, ErrTimeout)
			return false
		}
		if t.dropped { // the reap saw one of t's WRITEs fail
			return false
		}
	}
	return true
}

// claim takes n consecutive sequences at the home and returns the first.
func (w *Writer) claim(n uint64) (uint64, error) { return w.claimRoom(nil, n) }

// claimRoom claims n sequences. With reliable targets in tl, a CAS claim
// re-checks room for exactly the sequences it is about to take every time a
// lost CAS teaches it the counter's real value, so it never wins a sequence
// it has no room to write: a claim held while waiting for room would be
// reported as a gap by readers whose gap timeout is shorter than the wait.
// It returns ErrBackPressure, with nothing claimed, when the room does not
// come by the deadline. A FAA claim cannot know its sequence before it has
// it, so it relies on the caller's check against the cached counter.
func (w *Writer) claimRoom(tl *targetList, n uint64) (uint64, error) {
	if !w.inLimit(w.cached, n) { // fenced before claiming: nothing taken
		return 0, ErrFenced
	}
	if w.soloOn {
		if first, ok, err := w.soloClaim(n); ok {
			if err != nil {
				return 0, err // refused before it showed: nothing claimed
			}
			if w.pending > 0 {
				w.reapSome()
			}
			return first, nil // claimable checked it
		}
	}
	if w.faa {
		if !w.claimable(w.cached, n) { // the lease end, before the claim shows (see fenced)
			return 0, ErrFenced
		}
		orig, err := w.atomic(rdma.OpFetchAndAdd, 0, 0, n)
		if err != nil {
			return 0, err
		}
		w.cached = orig + n
		return w.fenced(orig, n)
	}
	for losses := 0; ; losses++ {
		if losses == maxCASLosses {
			// A writer far from the home (a round trip per try) can lose
			// every race to one beside it for as long as that one keeps
			// publishing. Fetch-and-add always wins, in one round trip;
			// the room it takes was checked for the last value seen.
			if !w.claimable(w.cached, n) {
				return 0, ErrFenced
			}
			orig, err := w.atomic(rdma.OpFetchAndAdd, 0, 0, n)
			if err != nil {
				return 0, err
			}
			w.cached = orig + n
			return w.fenced(orig, n)
		}
		want := w.cached
		if !w.claimable(want, n) { // the lease end too, before the claim shows (see fenced)
			return 0, ErrFenced
		}
		orig, err := w.atomic(rdma.OpCompareAndSwap, want, want+n, 0)
		if err != nil {
			return 0, err
		}
		if orig == want {
			w.cached = want + n
			return w.fenced(want, n)
		}
		w.cached = orig
		w.stats.casRetries.Add(1)
		if !w.inLimit(orig, n) {
			// fenced (FenceCounter) or past the reservation: no room to
			// wait for, fail over (a wait would end in ErrBackPressure)
			return 0, ErrFenced
		}
		if tl != nil && tl.reliable > 0 && !w.waitRoom(tl, orig+n-1) {
			w.unstick(tl, orig)
			return 0, ErrBackPressure
		}
	}
}

// fenced returns first, or ErrFenced when the claimed sequences reach the
// limit or the lease end (epoch.go): they are not written. The claim
// checks both before it shows, so this refuses only a claim the epoch
// ended under (a home that answered late, a stall between the check and
// the atomic); on the direct path that claim goes back (giveBack), so
// readers who READ the counter for gap detection do not take it for
// claimed and name a gap for sequences that never carried a tick (the
// publisher retries the tick in the next epoch: the CLI's NATS-outage
// test saw gaps of 2-6 then the epoch, with every tick received).
func (w *Writer) fenced(first, n uint64) (uint64, error) {
	if !w.claimable(first, n) {
		w.giveBack(first, n)
		return 0, ErrFenced
	}
	return first, nil
}

// giveBack undoes a claim of first..first+n-1 that will not be written,
// on the direct path (the counter in our own mapped memory, whose CPU
// atomics are the QPs' own), if nobody claimed after it: the counter is
// first+n still. Elsewhere (a round trip, and the home may not answer)
// the claim stays and readers name it a gap, never silently.
func (w *Writer) giveBack(first, n uint64) {
	if w.dctr != nil && w.dhome.Live() && atomic.CompareAndSwapUint64(w.dctr, first+n, first) {
		w.cached = first
	}
}

// maxCASLosses is how many CAS claims in a row a Publish or PublishBatch may
// lose before it claims by fetch-and-add instead.
const maxCASLosses = 4

// atomic runs one CAS or FAA on the counter through the home QP and waits
// for its completion; it returns the counter's original value.
func (w *Writer) atomic(op rdma.Opcode, compare, swap, add uint64) (uint64, error) {
	if w.dctr != nil {
		return w.directAtomic(op, compare, swap, add)
	}
	w.claimID += 1 << 8
	wr := &w.wr
	wr.ID, wr.Op, wr.Flags = w.claimID|idClaim, op, rdma.FlagSignaled
	wr.Local = rdma.SGE{Addr: w.stgAddr + stgResult, Len: 8, LKey: w.lkey}
	wr.Remote = w.counter
	wr.Compare, wr.Swap, wr.Add = compare, swap, add
	w.claimDone = false
	for {
		err := w.homeQP.PostSend(wr)
		if err == nil {
			break
		}
		if !errors.Is(err, rdma.ErrSendQueueFull) {
			w.broken = ErrHomeFailed
			return 0, ErrHomeFailed
		}
		if !w.waitCQ() {
			return 0, ErrTimeout
		}
	}
	idled := false
	tl := w.targets.Load() // pairs with the Store in AddTarget/RemoveTarget
	for !w.claimDone {
		// The claim completes on the home QP's CQ: poll that one only, not
		// one more CQ per subscriber on every tick.
		if w.reapCQ(tl, w.cq) > 0 {
			continue
		}
		if w.expired() {
			w.idle.Reset()
			return 0, ErrTimeout // a late completion has another claimID and is ignored
		}
		if w.fence.Load() == 0 { // pairs with the Store in SetLimit
			// The epoch ended while the home did not answer (stopped,
			// partitioned): fail over now, not at the timeout. Whatever the
			// claim takes later is never written (as after ErrTimeout).
			w.idle.Reset()
			return 0, ErrFenced
		}
		w.idle.Idle(0)
		idled = true
	}
	if idled {
		w.idle.Reset()
	}
	if w.pending > 2*len(tl.cqs) {
		// Signalled WRITEs pile up on the targets' CQs: drain them (one
		// write in SignalEvery is signalled, so on single ticks this is a
		// poll of each CQ every few ticks, not every tick).
		w.reap()
	}
	if !w.claimOK {
		w.broken = ErrHomeFailed
		return 0, ErrHomeFailed
	}
	// The provider wrote the original value before it queued the completion
	// that reap consumed: the CQ's hand-off orders this load after it.
	return binary.LittleEndian.Uint64(w.stg[stgResult:]), nil
}

// reap drains every CQ the writer uses and returns how many completions it
// took.
func (w *Writer) reap() int {
	total := 0
	tl := w.targets.Load() // pairs with the Store in AddTarget/RemoveTarget
	for _, cq := range tl.cqs {
		total += w.reapCQ(tl, cq)
	}
	return total
}

// reapCQ drains cq (one of tl's) and returns how many completions it took.
func (w *Writer) reapCQ(tl *targetList, cq rdma.CompletionQueue) int {
	n := cq.Poll(w.comps[:])
	for i := 0; i < n; i++ {
		c := &w.comps[i]
		switch c.ID & 0xff {
		case idClaim, idHead:
			if c.ID == w.claimID|c.ID&0xff {
				w.claimDone, w.claimOK = true, c.Status == rdma.StatusSuccess
			}
		case idFlush:
			if c.ID == w.claimID|idFlush {
				w.flushGot++
				if c.Status != rdma.StatusSuccess {
					w.failQP(tl, cq, c.QPN, c.Status)
				}
			}
		case idWrite:
			if w.pending > 0 {
				w.pending--
			}
			if c.Status != rdma.StatusSuccess {
				w.failQP(tl, cq, c.QPN, c.Status)
			}
		}
	}
	return n
}

// waitCQ waits for at least one completion; false at the deadline.
func (w *Writer) waitCQ() bool {
	for w.reap() == 0 {
		if w.expired() {
			w.idle.Reset()
			return false
		}
		w.idle.Idle(0)
	}
	w.idle.Reset()
	return true
}

func (w *Writer) expired() bool {
	now := monoNs()
	if w.deadline == 0 {
		w.deadline = now + w.timeoutNs
		return false
	}
	return now > w.deadline
}

// roomFor reports whether every reliable target has room for sequence last,
// from the cached limit when it suffices. A target that looks full by its
// credit cell has its ring's head READ too, so a subscriber that never
// attached the cell (AddCredit) still gets flow control, at one READ per
// look.
func (w *Writer) roomFor(tl *targetList, last uint64) bool {
	if tl == w.seen && last < w.limit {
		return true
	}
	w.seen = tl
	w.limit = ^uint64(0)
	for _, t := range tl.all {
		if t.cell == nil || t.dropped {
			continue
		}
		l := t.position() + t.slots
		if last >= l && t.headDue() && w.readHead(t) {
			l = t.position() + t.slots
		}
		if l < w.limit {
			w.limit = l
		}
	}
	return last < w.limit
}

// headDue reports whether a writer that found no room by t's credit cell
// should READ t's ring head now: at once where the head is mapped (a
// load), otherwise only once the cell has stood still for creditIdle, the
// longest a polling reader goes without a credit WRITE. Over tcp the READ
// queues behind every WRITE in flight, up to a whole ring: the writer
// waited for all of it to drain while the credits that came meanwhile went
// unseen, then found the pipeline empty, a stop-and-wait with a window of
// one ring. Publishing goroutine only.
func (t *target) headDue() bool {
	if t.dhead != nil {
		return true
	}
	c, now := t.cell.Next.Load(), monoNs() // pairs with the reader's credit WRITE
	if c != t.cellSeen {
		t.cellSeen, t.cellAt = c, now
		return false
	}
	if now-t.cellAt < creditIdle {
		return false
	}
	t.cellAt = now // the next READ another creditIdle later, unless the cell moves
	return true
}

// position is what the writer knows of a reliable target's reader: every
// sequence below it was delivered.
func (t *target) position() uint64 {
	p := t.cell.Next.Load() // pairs with the reader's credit WRITE
	if t.head > p {
		p = t.head
	}
	return p
}

// unstick runs when a publish found no room by its deadline, with first
// the topic's counter as this writer knows it. A reliable target whose
// reader sits at p, p's slot unwritten, while the counter is a whole ring
// ahead (first >= p+slots), never gets a later sequence from anyone (no
// writer has room for one), so its gap detection has nothing to go on and
// every writer of the topic waits on it for good: the sequences p..first-1
// were claimed while its ring was no writer's target (a failover or a
// reconnect left a hole bigger than the ring; the chaos test's reliable
// subscriber stopped every publisher so). When two publishes in a row saw
// it so at the same position, the writer writes one skip slot at p for
// p..first-1: the reader reports them as one EventSkip and goes on. No
// writer had room in that range beyond p+slots, and whatever a late
// claimant writes below it afterwards is below the reader or reported.
// Off the hot path: only after a publish timed out.
func (w *Writer) unstick(tl *targetList, first uint64) {
	for _, t := range tl.all {
		if t.cell == nil || t.dropped {
			continue
		}
		p := t.position()
		if first < p+t.slots || first-p >= MaxSkip {
			t.stuckAt = 0
			continue
		}
		if t.stuckAt != p {
			t.stuckAt = p // look again after the next publish without room
			continue
		}
		t.stuckAt = 0
		w.deadline = 0 // this publish's deadline has passed: one more for the READ
		stamp, ok := w.readWord(t, t.base+(p&t.mask)*t.slotSize)
		if !ok || stamp >= p { // written (or a newer lap: the position was stale)
			continue
		}
		binary.LittleEndian.PutUint64(w.skipBuf[:], first-1)
		w.stage(0, p, 0, FlagSkip, w.skipBuf[:], 0)
		w.writeSlot(t, 0)
		w.stats.skipped.Add(first - p)
		w.log.Warn().Uint64("target", t.id).Uint64("from", p).Uint64("to", first-1).
			Msg("ring: reliable reader stuck a ring behind the counter; its hole written as one skip slot")
	}
}

// readHead READs t's ring head (the reader's position, which it stores
// after every advancing poll) into t.head. False if the READ failed (the
// target is dropped) or timed out.
func (w *Writer) readHead(t *target) bool {
	if t.dhead != nil {
		if !t.hm.Live() {
			w.drop(t, errDirectGone)
			return false
		}
		if h := atomic.LoadUint64(t.dhead); h > t.head && h != StampBusy { // pairs with the reader's store of its head
			t.head = h
		}
		return true
	}
	h, ok := w.readWord(t, t.base-offSlots+offHot)
	if ok && h > t.head && h != StampBusy {
		t.head = h
	}
	return ok
}

// readWord READs the 8 bytes at addr of t's ring. False if the READ
// failed (the target is dropped) or timed out.
func (w *Writer) readWord(t *target, addr uint64) (uint64, bool) {
	w.claimID += 1 << 8
	wr := &w.wr
	wr.ID, wr.Op, wr.Flags = w.claimID|idHead, rdma.OpRead, rdma.FlagSignaled
	wr.Local = rdma.SGE{Addr: w.stgAddr + stgHead, Len: 8, LKey: t.lkey}
	wr.Remote = rdma.RemoteAddr{Addr: addr, RKey: t.rkey}
	w.claimDone = false
	if err := t.qp.PostSend(wr); err != nil {
		if !errors.Is(err, rdma.ErrSendQueueFull) {
			w.drop(t, err)
		}
		return 0, false
	}
	for !w.claimDone {
		if w.reap() > 0 {
			continue
		}
		if w.expired() {
			w.idle.Reset()
			return 0, false
		}
		w.idle.Idle(0)
	}
	w.idle.Reset() // the wait is over: a time-based strategy spins again next time
	if !w.claimOK {
		w.drop(t, rdma.ErrCompletion)
		return 0, false
	}
	return binary.LittleEndian.Uint64(w.stg[stgHead:]), true
}

// waitRoom waits through the idle strategy until roomFor(last); false at
// the deadline.
func (w *Writer) waitRoom(tl *targetList, last uint64) bool {
	if w.roomFor(tl, last) {
		return true
	}
	for !w.roomFor(tl, last) {
		if w.pending > 0 {
			w.reap()
		}
		if w.expired() {
			w.idle.Reset()
			return false
		}
		w.idle.Idle(0)
	}
	w.idle.Reset()
	return true
}

// failQP handles an error completion on a QP: the home's breaks the writer,
// a target's drops the target.
func (w *Writer) failQP(tl *targetList, cq rdma.CompletionQueue, qpn uint32, st rdma.Status) {
	if qpn == w.homeQPN && cq == w.cq {
		w.broken = ErrHomeFailed
		if w.journal != nil {
			w.journal.dropped = true
		}
		return
	}
	for _, t := range tl.all {
		if t.qpn == qpn && t.cq == cq && !t.dropped {
			w.drop(t, st.Err())
			return
		}
	}
}

// drop removes a failed target (cold path: it locks, logs and calls back).
func (w *Writer) drop(t *target, err error) {
	if t.dropped {
		return
	}
	t.dropped = true
	if t.journal {
		w.broken = ErrHomeFailed
		return
	}
	w.stats.dropped.Add(1)
	// Never wait on the control plane here: if AddTarget/RemoveTarget hold
	// the lock, the target stays in the list, skipped (dropped), until a
	// later publish finds the lock free.
	if w.mu.TryLock() {
		w.removeLocked(t.id, t)
		w.mu.Unlock()
	} else {
		w.sweep = true
	}
	w.log.Warn().Uint64("target", t.id).Err(err).Msg("ring: target dropped")
	if w.onDrop != nil {
		w.onDrop(t.id, err)
	}
}
