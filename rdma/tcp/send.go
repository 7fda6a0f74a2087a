package tcp

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/handoff"
)

// PostSend checks wr against local rules, copies its frame (and payload)
// into the QP's send buffer and returns; a flusher goroutine writes the
// buffer to the socket. It never blocks, allocates nothing and makes no
// system call.
//
// Returned errors mean nothing was queued: rdma.ErrClosed,
// rdma.ErrQPState (not connected yet), rdma.ErrSendQueueFull (SendDepth
// requests outstanding, or the send buffer is full), rdma.ErrInvalidRequest
// (nil). A local error (unknown lkey, SGE out of its region, inline over
// the limit, unknown opcode) completes wr with its status and moves the QP
// to ERR, as in verbs. In ERR, wr completes with StatusFlushed.
func (q *QP) PostSend(wr *rdma.WorkRequest) error {
	if wr == nil {
		return rdma.ErrInvalidRequest
	}
	spinAcquire(&q.postBusy)
	q.rewind()
	queued, err := q.postSend(wr, false, false)
	q.trimCredits()
	if queued {
		q.publish()
	}
	postDone(&q.postBusy)
	return err
}

var _ rdma.BatchPoster = (*QP)(nil)

// PostSendBatch posts wrs in order, as PostSend one by one would
// (rdma.BatchPoster), and hands them to the flusher at once: a tick's body
// and stamp WRITEs leave in one write to the socket, never split by a
// flusher that woke between them, and the batch pays one posting flag and
// one publish. Consecutive WRITEs to one region go as one WRITE list
// (frame.go): one frame for the responder to decode, 16 bytes of header
// per WRITE instead of 48, and 8-byte WRITEs at a fixed stride (a ring's
// stamps) joined into one run entry, with no header of their own.
func (q *QP) PostSendBatch(wrs []rdma.WorkRequest) (int, error) {
	spinAcquire(&q.postBusy)
	q.rewind()
	unpublished := false
	n := 0
	var err error
	q.inBatch = true
	if need := len(wrs) - q.credits; need > 0 {
		q.credits += q.scq.take(need + q.scq.stash) // one atomic for many requests, not one per request
	}
	for n < len(wrs) {
		if q.list.tail == tailOther {
			// not a run's next WRITE: postSend (postRun would say 0)
		} else if k := q.postRun(wrs[n:]); k > 0 {
			n += k
			unpublished = true
			continue
		}
		join := n+1 < len(wrs) && listable(&wrs[n], &wrs[n+1])
		var queued bool
		if queued, err = q.postSend(&wrs[n], unpublished, join); err != nil {
			break
		}
		unpublished = unpublished || queued
		n++
	}
	q.closeList()
	q.endBatch()
	if q.posted != q.npos { // the poster's own word: only it stores posted
		release.Store64(&q.posted, q.npos) // once per batch, before the flusher has its frames (publish's XCHG orders it): pairs with the Loads in reap and drain
	}
	if unpublished {
		q.publish()
	}
	postDone(&q.postBusy)
	return n, err
}

// endBatch keeps at most the CQ's stash of the completion credits the batch
// took and did not use, and lets go of the source region it kept pinned.
// Posting goroutine only.
func (q *QP) endBatch() {
	q.inBatch = false
	q.trimCredits()
	if q.pin != nil {
		q.pin.release()
		q.pin = nil
	}
}

// listable reports whether b may follow a in a WRITE list: both WRITEs to
// the same region. (postSend checks the sizes.)
func listable(a, b *rdma.WorkRequest) bool {
	return a.Op == rdma.OpWrite && b.Op == rdma.OpWrite && a.Remote.RKey == b.Remote.RKey
}

// openList is the WRITE list a PostSendBatch is filling: its header's place
// in the send buffer (patched as WRITEs join), its region, its WRITEs and
// the bytes after its header. Posting goroutine only.
type openList struct {
	open  bool
	hdr   uint64
	rkey  uint32
	count uint32
	bytes uint32
	// The last entry: its header's place, the address of its last WRITE,
	// its kind (a plain 8-byte WRITE or a run can grow into or by a run),
	// and a run's stride and count so far.
	last   uint64
	lastAt uint64
	tail   uint8 // tailOther, tailWord (plain, 8 bytes) or tailRun
	stride uint64
	runN   uint16
	flags  uint8 // the last entry's flags
}

// What the last entry of an open WRITE list can become (openList.tail).
const (
	tailOther uint8 = iota
	tailWord
	tailRun
)

// extend adds an 8-byte WRITE at raddr with flags and payload p to the
// open list's last entry when it makes (or continues) a run (frame.go):
// 8 bytes on the wire instead of 24. It reports whether it did. The list
// has room for it (the caller checked). The run's header is written once,
// by seal, when the run ends.
func (q *QP) extend(raddr uint64, flags uint8, p []byte) bool {
	l := &q.list
	if !l.runOn(raddr) {
		return false
	}
	l.flags |= flags
	l.last = raddr
	q.tx.writeWord(p)
	l.count++
	l.bytes += 8
	return true
}

// runOn counts an 8-byte WRITE at raddr into the list's last entry when
// it continues that entry's run, or starts one from a lone 8-byte WRITE
// (a stride up to 4 GiB, upwards only); it reports whether it did.
func (l *openList) runOn(raddr uint64) bool {
	switch {
	case l.tail == tailRun && raddr-l.last == l.stride && raddr > l.last && l.runN < listMaxCount:
		l.runN++
	case l.tail == tailWord && raddr > l.last && raddr-l.last >= 8 && raddr-l.last <= 1<<32-1:
		l.tail, l.stride, l.runN = tailRun, raddr-l.last, 2
	default:
		return false
	}
	return true
}

// postRun is postSend for the WRITEs at the start of wrs that extend the
// open list's last entry into or along a run (extend): 8-byte WRITEs to
// the list's region from the region the batch keeps pinned, a stride
// apart, such as a ring batch's stamps. Their checks are postSend's, with
// the room (send queue, completion credits, send buffer, list limits)
// taken once for the run instead of once per WRITE. It returns how many
// it queued; 0 leaves the next to postSend.
func (q *QP) postRun(wrs []rdma.WorkRequest) int {
	l, p := &q.list, q.pin
	if !l.open || l.tail == tailOther || p == nil || rdma.QPState(q.state.Load()) != rdma.QPReadyToSend {
		return 0
	}
	pos := q.npos
	k := uint64(len(wrs))
	k = min(k, q.sqDepth-(pos-q.retired.Load()), uint64(q.credits))
	k = min(k, q.tx.room(8*k)/8)
	if lim := uint64(min(listMaxBytes, q.maxMsg)); uint64(l.bytes)+listElemLen < lim {
		k = min(k, uint64(listMaxCount-l.count), (lim-uint64(l.bytes)-listElemLen)/8)
	} else {
		k = 0
	}
	i := uint64(0)
run:
	for ; i < k; i++ {
		wr := &wrs[i]
		raddr := wr.Remote.Addr
		if wr.Op != rdma.OpWrite || wr.Local.Len != 8 || wr.Remote.RKey != l.rkey || wr.Flags&rdma.FlagInline != 0 || wr.Local.LKey != p.lkey {
			break
		}
		if !l.runOn(raddr) {
			break run
		}
		src, ok := p.span(wr.Local.Addr, 8)
		if !ok {
			l.runN-- // postSend completes it with its local error; the run stays as it was
			if l.runN < 2 {
				l.tail = tailWord
			}
			break run
		}
		signaled := q.cfg.SignalAll || wr.Flags&rdma.FlagSignaled != 0
		l.flags |= q.ackFlags(pos+i, signaled)
		l.last = raddr
		q.tx.writeWord(src)
		l.count++
		l.bytes += 8
		q.sq[(pos+i)&q.sqMask] = sqEntry{id: wr.ID, op: rdma.OpWrite, len: 8, signaled: signaled}
	}
	q.credits -= int(i)
	q.npos = pos + i
	return int(i)
}

// seal writes the header of the open list's last entry if it grew into a
// run: its stride, OR'ed flags, kind and count over the plain entry it
// started as. Before any other entry, and before closeList patches the
// list's header.
func (q *QP) seal() {
	l := &q.list
	if l.tail != tailRun {
		return
	}
	var hd [8]byte
	binary.LittleEndian.PutUint32(hd[:], uint32(l.stride))
	hd[4], hd[5] = l.flags, elemRun
	binary.LittleEndian.PutUint16(hd[6:], l.runN)
	if t := q.tx; (l.lastAt+8)&t.mask+8 <= uint64(len(t.buf)) {
		binary.LittleEndian.PutUint64(t.buf[(l.lastAt+8)&t.mask:], binary.LittleEndian.Uint64(hd[:])) // no wrap: one 8-byte store
	} else {
		t.writeAt(l.lastAt+8, hd[:])
	}
	l.tail = tailOther
}

// publish hands what postSend queued to the flusher.
func (q *QP) publish() {
	q.tx.publish()
	if rdma.QPState(q.state.Load()) == rdma.QPError || q.stopped.Load() {
		// fail or Close ran meanwhile and may have drained before our
		// Stores; drain again so no request is lost. (A Close still
		// lingering lets the reaper answer them, or drains them at its
		// end.)
		q.drain()
	}
}

// postSend queues wr; queued says its frame is in the send buffer, not yet
// published to the flusher (the caller publishes). unpublished says earlier
// frames of this call are: they are published before a local error fails
// the QP.
//
// join says the caller's next request may join this one in a WRITE list:
// a WRITE that cannot join the list already open starts one.
func (q *QP) postSend(wr *rdma.WorkRequest, unpublished, join bool) (queued bool, err error) {
	state := rdma.QPState(q.state.Load())
	switch state {
	case rdma.QPReadyToSend, rdma.QPError:
	case rdma.QPClosed:
		return false, rdma.ErrClosed
	default:
		return false, errNotConnected
	}
	pos := q.npos
	if pos-q.retired.Load() >= q.sqDepth {
		return false, rdma.ErrSendQueueFull
	}
	if !q.reserve() { // room for the completion this request may make
		return false, rdma.ErrSendQueueFull
	}
	e := sqEntry{id: wr.ID, op: wr.Op, signaled: q.cfg.SignalAll || wr.Flags&rdma.FlagSignaled != 0}
	if state == rdma.QPError {
		e.status, e.preset = rdma.StatusFlushed, true
		q.enqueueFailed(pos, e)
		return false, nil
	}
	r := request{op: wr.Op, seq: pos + 1, raddr: wr.Remote.Addr, rkey: wr.Remote.RKey}
	if hasPayload(wr.Op) {
		r.flags = q.ackFlags(pos, e.signaled)
	}
	inline := wr.Flags&rdma.FlagInline != 0
	var (
		payload []byte
		src     *region
		st      = rdma.StatusSuccess
	)
	switch wr.Op {
	case rdma.OpWrite, rdma.OpWriteImm, rdma.OpSend:
		if wr.Op != rdma.OpWrite {
			r.imm = wr.Imm
		}
		if wr.Op == rdma.OpSend {
			r.raddr, r.rkey = 0, 0
		}
		switch {
		case inline && len(wr.Inline) > q.maxInline:
			st = rdma.StatusLocalQPOp
		case inline:
			payload = wr.Inline
		case wr.Local.Len > q.maxMsg:
			st = rdma.StatusLocalLength
		case wr.Local.Len > 0:
			src, payload, st = q.sourceSpan(wr.Local)
		}
		if st == rdma.StatusSuccess && uint32(len(payload)) > q.maxMsg {
			st = rdma.StatusLocalLength
		}
		r.len = uint32(len(payload))
		e.len = r.len
	case rdma.OpRead:
		switch {
		case inline:
			st = rdma.StatusLocalQPOp
		case wr.Local.Len > q.maxMsg:
			st = rdma.StatusLocalLength
		case wr.Local.Len > 0:
			st = q.checkLocal(wr.Local, rdma.AccessLocalWrite, wr.Local.Len)
		}
		r.len = wr.Local.Len
		e.len = wr.Local.Len
	case rdma.OpCompareAndSwap, rdma.OpFetchAndAdd:
		switch {
		case inline:
			st = rdma.StatusLocalQPOp
		case wr.Local.Len < 8:
			st = rdma.StatusLocalLength
		default:
			st = q.checkLocal(wr.Local, rdma.AccessLocalWrite, 8)
		}
		if wr.Op == rdma.OpCompareAndSwap {
			r.arg1, r.arg2 = wr.Compare, wr.Swap
		} else {
			r.arg1 = wr.Add
		}
		e.len = 8
	default:
		st = rdma.StatusLocalQPOp
	}
	if st != rdma.StatusSuccess {
		if src != nil {
			src.release()
		}
		q.closeList()
		if unpublished {
			atomic.StoreUint64(&q.posted, pos) // the batch's earlier requests, before the flusher has them
			q.publish()                        // they go first, as posted
		}
		// As in verbs, a local error completes the request and moves the
		// QP to ERR; earlier requests complete StatusFlushed.
		e.status, e.preset, e.len = st, true, 0
		q.sq[pos&q.sqMask] = e
		q.npos = pos + 1
		atomic.StoreUint64(&q.posted, pos+1) // pairs with drain's Load; covers the batch's earlier requests
		q.fail(rdma.StatusFlushed, errLocal)
		q.drain() // in case the QP was already in ERR and fail did nothing
		return false, nil
	}
	t, l := q.tx, &q.list
	if l.open && (wr.Op != rdma.OpWrite || r.rkey != l.rkey || l.count == listMaxCount ||
		uint64(l.bytes)+listElemLen+uint64(r.len) > uint64(min(listMaxBytes, q.maxMsg))) {
		q.closeList()
	}
	opening := !l.open && join && wr.Op == rdma.OpWrite && listElemLen+uint64(r.len) <= uint64(min(listMaxBytes, q.maxMsg))
	need := uint64(reqHeaderLen + len(payload))
	switch {
	case l.open:
		need = listElemLen + uint64(len(payload)) // or 8 less than that, when it joins a run
	case opening:
		need += listElemLen
	}
	if t.room(need) < need {
		if src != nil {
			src.release()
		}
		q.unreserve()
		return false, rdma.ErrSendQueueFull
	}
	var hdr [reqHeaderLen]byte
	switch {
	case l.open || opening:
		if opening {
			*l = openList{open: true, hdr: t.w, rkey: r.rkey}
			h := request{op: opWriteList, seq: r.seq, rkey: r.rkey, len: 0, imm: 0}
			h.put(hdr[:])
			t.write(hdr[:])
		}
		if opening || r.len != 8 || !q.extend(r.raddr, r.flags, payload) {
			q.seal()
			el := listElem{raddr: r.raddr, len: r.len, flags: r.flags}
			l.lastAt, l.last, l.flags, l.tail = t.w, r.raddr, r.flags, tailOther
			if r.len == 8 {
				l.tail = tailWord
			}
			if i := t.w & t.mask; i+listElemLen <= uint64(len(t.buf)) {
				el.put(t.buf[i:]) // no wrap: straight into the buffer
				t.w += listElemLen
			} else {
				el.put(hdr[:listElemLen])
				t.write(hdr[:listElemLen])
			}
			t.write(payload)
			l.count++
			l.bytes += listElemLen + r.len
		}
	default:
		r.put(hdr[:])
		t.write(hdr[:])
		t.write(payload)
	}
	if src != nil {
		src.release()
	}
	if e.due() {
		q.sqDst[pos&q.sqMask] = sqDst{laddr: wr.Local.Addr, lkey: wr.Local.LKey}
		q.due.Add(1) // before posted: the reaper spins once it sees either
	}
	q.sq[pos&q.sqMask] = e
	q.npos = pos + 1
	if !q.inBatch {
		release.Store64(&q.posted, pos+1) // pairs with the Loads in reap and drain; PostSend's publish (an XCHG) follows
	}
	return true, nil
}

// ackFlags says when the responder should answer the WRITE or SEND at
// post index pos (frame.go): at once, on one request in ackStride; when its
// input runs dry, on a signalled request posted while fewer than
// promptBelow are outstanding; otherwise with either of those or after
// ackDelay. Each answer is a write(2) on the responder and a wake-up of
// this QP's reaper, which a stream of signalled WRITEs (one in 16 in
// ring.Writer) paid about every 50 requests. Posting goroutine only.
func (q *QP) ackFlags(pos uint64, signaled bool) uint8 {
	var f uint8
	if q.sinceAck++; q.sinceAck >= q.ackStride {
		q.sinceAck = 0
		f = reqAckNow
	}
	if signaled && pos-q.consumed.Load() < promptBelow { // pairs with complete's Store
		f |= reqSignaled
	}
	return f
}

// promptBelow is how few outstanding requests make a signalled WRITE or
// SEND worth an answer as soon as the responder's input runs dry: a poller
// may wait for it. More outstanding means a stream, answered in bulk (by
// the next reqAckNow, or ackDelay after the input stops). 2: a signalled
// request posted alone, or right behind one. With 16, a paced feed (a
// ring's tick is two WRITEs, one in 16 signalled, and every answer
// empties the queue) had every signalled WRITE answered at once: in
// tickbus bench's tcp latency run, 20,000 ticks/s, the publisher's
// reaper took 3,619 and 1,706 responses in 2 s against 325 and 384 with
// 2 (debug counters, two A/B pairs), each a wake-up of a goroutine on a
// host whose cores the publisher and subscriber keep busy.
const promptBelow = 2

// reserve takes the credit for the completion a request may make: from
// the QP's own stash (taken from the CQ many at a time: its atomic is on a
// cache line that the CQ's poller and this QP's reaper write too), or from
// the CQ. unreserve gives it back to the stash. Posting goroutine only.
func (q *QP) reserve() bool {
	if q.credits > 0 {
		q.credits--
		return true
	}
	return q.scq.reserve()
}

func (q *QP) unreserve() { q.credits++ }

// trimCredits gives the CQ back what the stash holds beyond the CQ's
// stash size. Posting goroutine only (or Close, holding postBusy).
func (q *QP) trimCredits() {
	if q.credits > q.scq.stash {
		q.scq.give(q.credits - q.scq.stash)
		q.credits = q.scq.stash
	}
}

// sourceSpan returns the bytes of a WRITE's or SEND's source, with the
// region to release after the copy, or nil when the batch holds it: a
// PostSendBatch keeps its first source region pinned until endBatch, so
// that the requests after it from the same region (a ring's staging) pay
// neither the key lookup nor the pin.
func (q *QP) sourceSpan(sge rdma.SGE) (*region, []byte, rdma.Status) {
	if p := q.pin; p != nil && p.lkey == sge.LKey {
		if b, ok := p.span(sge.Addr, uint64(sge.Len)); ok {
			return nil, b, rdma.StatusSuccess
		}
		return nil, nil, rdma.StatusLocalProtection
	}
	r, b, st := q.localSpan(sge, 0, sge.Len)
	if r != nil && q.inBatch && q.pin == nil {
		q.pin = r
		return nil, b, st
	}
	return r, b, st
}

// localSpan pins the local region behind sge and returns its n bytes.
func (q *QP) localSpan(sge rdma.SGE, need rdma.Access, n uint32) (*region, []byte, rdma.Status) {
	r := q.dev.keys.Load().byL[sge.LKey]
	if r == nil || !r.access.Has(need) || !r.acquire() {
		return nil, nil, rdma.StatusLocalProtection
	}
	b, ok := r.span(sge.Addr, uint64(n))
	if !ok {
		r.release()
		return nil, nil, rdma.StatusLocalProtection
	}
	return r, b, rdma.StatusSuccess
}

// checkLocal checks that sge names n bytes of a local region granting need.
func (q *QP) checkLocal(sge rdma.SGE, need rdma.Access, n uint32) rdma.Status {
	r, _, st := q.localSpan(sge, need, n)
	if r != nil {
		r.release()
	}
	return st
}

// enqueueFailed queues an entry that will not go on the wire and drains,
// so it completes in order with its preset status.
func (q *QP) enqueueFailed(pos uint64, e sqEntry) {
	q.sq[pos&q.sqMask] = e
	q.npos = pos + 1
	atomic.StoreUint64(&q.posted, pos+1) // pairs with drain's Load; covers the batch's earlier requests
	q.drain()
}

// rewind moves the send buffer's cursor back to its start when the flusher
// has written everything and the cursor is past txHot: a stream whose
// flusher keeps up then writes the same few cache-warm pages instead of
// walking the whole buffer (4 MiB by default), a cache miss on every line.
// Called before a post queues anything (nothing unpublished).
func (q *QP) rewind() {
	if t := q.tx; t != nil && t.w&t.mask >= txHot && t.rpos.Load() == t.w { // pairs with the flusher's Store
		next := (t.w | t.mask) + 1 // the next multiple of the buffer's size: index 0
		t.jumpFrom, t.jumpTo = t.w, next
		t.skipFrom.Store(t.w) // before wpos: the flusher Loads them after it
		t.skipTo.Store(next)
		t.w = next
		t.rseen = next // everything was written: all of the buffer is free
	}
}

// txHot is how far into the send buffer a post may start before rewind
// takes the cursor back.
const txHot = 128 << 10

// txRing is the single-producer, single-consumer byte ring between
// PostSend and the flusher goroutine.
type txRing struct {
	buf  []byte
	mask uint64
	w    uint64 // producer's cursor, published as wpos
	// jumpFrom, jumpTo: the producer's copy of its last rewind (room);
	// rseen: the flusher's position as the producer last loaded it (room).
	jumpFrom, jumpTo uint64
	rseen            uint64
	_                [40]byte
	wpos             atomic.Uint64 // Store by the producer, Load by the flusher
	_                [56]byte
	rpos             atomic.Uint64 // Store by the flusher, Load by the producer
	_                [56]byte
	// A rewind: the flusher, at skipFrom, goes on at skipTo; nothing was
	// written between. Stored by the producer before the wpos that covers
	// bytes after it.
	skipFrom, skipTo atomic.Uint64
	_                [48]byte
	// sleeping is set by the flusher before it parks on wake; the producer
	// Loads it after publishing and wakes the flusher.
	sleeping atomic.Bool
	wake     chan struct{}
}

func newTxRing(size int) *txRing {
	return &txRing{buf: make([]byte, size), mask: uint64(size - 1), wake: make(chan struct{}, 1)}
}

// room returns how many bytes are free, at least need if they are: from
// the flusher's position the producer last saw (rseen) while that shows
// enough, and only otherwise from rpos. rpos is stored by the flusher after
// every write(2), so loading it per post was a cache miss per post on a
// line the other core had just written; a position seen earlier is never
// ahead of the real one, so the answer errs only on the side of a reload.
func (t *txRing) room(need uint64) uint64 {
	if f := uint64(len(t.buf)) - (t.w - t.rseen); f >= need {
		return f
	}
	r := t.rpos.Load() // pairs with the flusher's Store
	if r == t.jumpFrom {
		r = t.jumpTo // a rewind the flusher has not reached: all of it was free
	}
	t.rseen = r
	return uint64(len(t.buf)) - (t.w - r)
}

// writeWord is write of 8 bytes, with one store where they do not wrap.
func (t *txRing) writeWord(b []byte) {
	if i := t.w & t.mask; i+8 <= uint64(len(t.buf)) {
		binary.LittleEndian.PutUint64(t.buf[i:], binary.LittleEndian.Uint64(b))
		t.w += 8
		return
	}
	t.write(b)
}

func (t *txRing) write(b []byte) {
	i := t.w & t.mask
	n := copy(t.buf[i:], b)
	if n < len(b) {
		copy(t.buf, b[n:])
	}
	t.w += uint64(len(b))
}

// closeList ends the open WRITE list, if any: its header gets its length
// and count. Every path that ends a list, or publishes, calls it first.
// Posting goroutine only.
func (q *QP) closeList() {
	l := &q.list
	if !l.open {
		return
	}
	q.seal()
	l.open = false
	t := q.tx
	if i := l.hdr & t.mask; i+reqHeaderLen <= uint64(len(t.buf)) { // the header does not wrap: two stores, not two copies
		binary.LittleEndian.PutUint32(t.buf[i+4:], l.bytes)  // the header's len
		binary.LittleEndian.PutUint32(t.buf[i+28:], l.count) // the header's imm: the count
		return
	}
	var patch [4]byte
	binary.LittleEndian.PutUint32(patch[:], l.bytes)
	t.writeAt(l.hdr+4, patch[:])
	binary.LittleEndian.PutUint32(patch[:], l.count)
	t.writeAt(l.hdr+28, patch[:])
}

// writeAt overwrites the bytes at cursor pos (written, not yet published)
// with b.
func (t *txRing) writeAt(pos uint64, b []byte) {
	i := pos & t.mask
	n := copy(t.buf[i:], b)
	if n < len(b) {
		copy(t.buf, b[n:])
	}
}

func (t *txRing) publish() {
	t.wpos.Store(t.w) // pairs with the flusher's Load
	if t.sleeping.Load() && t.sleeping.CompareAndSwap(true, false) {
		select {
		case t.wake <- struct{}{}:
			handoff.Mark() // the poster's next idle step lets the flusher run
		default:
		}
	}
}

// flush writes what PostSend buffered to the socket, as much as there is
// per system call (one write, or one writev when the data wraps). When the
// buffer stays empty for FlushSpins yields it parks until PostSend wakes it.
func (q *QP) flush(c *rawConn, t *txRing) {
	defer q.workers.Done()
	defer c.release()
	var vec [2][]byte
	spins := 0
	for {
		w, r := t.wpos.Load(), t.rpos.Load()
		if w == r {
			if spins < q.dev.cfg.FlushSpins {
				spins++
				rdma.Yield{}.Idle(0) // not Gosched every time: each wakes an idle P's thread
				continue
			}
			t.sleeping.Store(true)
			if t.wpos.Load() != r { // pairs with publish's Store
				t.sleeping.Store(false)
				continue
			}
			select {
			case <-t.wake:
				handoff.Done()
			case <-q.stop:
				return
			}
			spins = 0
			continue
		}
		spins = 0
		if r == t.skipFrom.Load() { // pairs with rewind's Stores, before wpos
			r = t.skipTo.Load()
		}
		i, j := r&t.mask, w&t.mask
		var err error
		if i < j || j == 0 {
			_, err = c.Write(t.buf[i : i+(w-r)])
		} else {
			vec[0], vec[1] = t.buf[i:], t.buf[:j]
			err = c.writev(&vec)
		}
		if err != nil {
			q.fail(rdma.StatusRetryExceeded, err)
			return
		}
		t.rpos.Store(w) // pairs with free's Load
	}
}

// putBytes writes src into dst; an aligned 8-byte write is one atomic
// store, so a reader spinning with an atomic load sees all or nothing.
func putBytes(dst, src []byte) {
	if len(dst) == 8 && aligned8(dst) {
		atomic.StoreUint64(word(dst), binary.NativeEndian.Uint64(src)) // pairs with readers' atomic loads
		return
	}
	copy(dst, src)
}
