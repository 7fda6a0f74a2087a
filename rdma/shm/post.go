package shm

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
)

// Preallocated errors: PostSend returns them without allocating.
var (
	errQPClosed = fmt.Errorf("%w: shm queue pair", rdma.ErrClosed)
	errCQClosed = fmt.Errorf("%w: shm completion queue", rdma.ErrClosed)
	errNotRTS   = fmt.Errorf("%w: PostSend needs RTS (or ERR, to flush)", rdma.ErrQPState)
	errNilWR    = fmt.Errorf("%w: nil work request", rdma.ErrInvalidRequest)
)

// PostSend carries out wr at once, in this goroutine: the copy or the atomic
// on the peer's mapped memory, after the checks the target would make. It
// never blocks, takes no lock, makes no syscall and allocates nothing.
//
// Requests of one QP run in post order, and each finishes before PostSend
// returns, so a later request's stores are never visible before an earlier
// one's.
//
// Visibility of an 8-byte WRITE to an 8-aligned address: it is one 64-bit
// release store (release.Store64: a plain MOV on amd64, where x86-TSO keeps
// stores in order; sync/atomic's store elsewhere), so a reader that loads
// the word with an atomic 64-bit load (sync/atomic.LoadUint64, or an 8-byte
// aligned READ, which is such a load) sees either the old or the new value,
// never a mix, and once it sees the new value it also sees every byte of
// every earlier request of the same QP. It is not a full fence: a later
// load by the poster may be satisfied before the store is visible.
// That is the ring's stamp protocol: payload WRITE, then stamp WRITE.
//
// Posting from several goroutines at once is allowed but serialised: a
// second poster yields until the first leaves. An error completion moves
// the QP to ERR, as on verbs.
//
// Errors returned (nothing was done, nothing will complete): rdma.ErrClosed
// after Close; rdma.ErrQPState before RTS; rdma.ErrSendQueueFull when the
// send queue or the send CQ has no room. Every other failure completes with
// an error status and leaves the target's memory untouched.
func (q *QP) PostSend(wr *rdma.WorkRequest) error {
	if wr == nil {
		return errNilWR
	}
	g := q.enter()
	err := q.post(wr)
	q.leave(g)
	return err
}

// PostSendBatch posts wrs in order, as verbs posts a chain of work
// requests (wr->next) in one ibv_post_send: one entry into the QP for all
// of them, each carried out as PostSend would, in order. It returns how
// many were posted; if err is not nil, wrs[n] was not posted (err is what
// PostSend would have returned for it) and neither was any request after
// it. It implements rdma.BatchPoster.
func (q *QP) PostSendBatch(wrs []rdma.WorkRequest) (int, error) {
	g := q.enter()
	n := q.writeRun(wrs)
	var err error
	for i := n; i < len(wrs); i++ {
		if err = q.post(&wrs[i]); err != nil {
			break
		}
		n++
	}
	q.leave(g)
	return n, err
}

// writeRun carries out the longest prefix of wrs that is plain WRITEs (from
// an SGE, unsignalled or signalled) passing every check, as write would,
// one after another, but with the QP's state, send-queue room and key
// tables loaded once for the run instead of once per request, and the
// regions looked up only when a request's key differs from the one
// before: a ring slot is a chain of two or three WRITEs, a batch of k slots
// 2k+1. It stops before the first request that needs anything else
// (another op, inline data, a failing check, no room, no CQ credit), which
// post then handles as for any request, and returns how many it did.
// Inside a post only.
func (q *QP) writeRun(wrs []rdma.WorkRequest) int {
	if rdma.QPState(q.state.Load()) != rdma.QPReadyToSend {
		return 0
	}
	n := q.sendDepth - (q.sqPosted - q.sqRetired.Load()) // pairs with retire's store
	if n > uint64(len(wrs)) {
		n = uint64(len(wrs))
	}
	// The lookup caches (see QP.ltab): lr is kt.m[lk] whenever not nil.
	kt, rt := q.dev.keys.Load(), q.remote.Load()
	lk, lr, rk, rr := q.lkey, q.lreg, q.rkey, q.rreg
	if kt != q.ltab {
		lr = nil
	}
	if rt != q.rtab {
		rr = nil
	}
	i := 0
	for ; i < int(n); i++ {
		wr := &wrs[i]
		if wr.Op != rdma.OpWrite || wr.Flags&^rdma.FlagSignaled != 0 {
			break
		}
		if lr == nil || wr.Local.LKey != lk {
			lk, lr = wr.Local.LKey, kt.m[wr.Local.LKey]
		}
		if rr == nil || wr.Remote.RKey != rk {
			rk, rr = wr.Remote.RKey, rt.m[wr.Remote.RKey]
		}
		if lr == nil || rr == nil || !rr.access.Has(rdma.AccessRemoteWrite) {
			break
		}
		// The bounds checks of Region.at and remoteAt.
		ln, la, ra := uint64(wr.Local.Len), wr.Local.Addr, wr.Remote.Addr
		if la < lr.addr || ln > uint64(len(lr.mem)) || la-lr.addr > uint64(len(lr.mem))-ln {
			break
		}
		if ln > maxMsgSize || ra < rr.addr || ln > rr.length || ra-rr.addr > rr.length-ln {
			break
		}
		sig := q.signaled(wr)
		if sig && q.sendCQ.reserve() != nil {
			break
		}
		lo, ro := la-lr.addr, ra-rr.addr
		put(rr.mem[ro:ro+ln:ro+ln], lr.mem[lo:lo+ln:lo+ln], ra&7 == 0)
		if sig {
			q.record(wr, rdma.StatusSuccess, uint32(ln), true)
		} else {
			q.sqPosted++ // record of an unsignalled success
		}
	}
	if lr != nil {
		q.ltab, q.lkey, q.lreg = kt, lk, lr
	}
	if rr != nil {
		q.rtab, q.rkey, q.rreg = rt, rk, rr
	}
	return i
}

// enter makes gen odd (one CAS: a full fence, so the loads of state and
// tables that follow cannot pass it) and returns its even value before.
// Inside (gen odd): Close, ERR and regionDel wait for gen to move on
// before they unmap.
func (q *QP) enter() uint64 {
	g := q.gen.Load()
	if g&1 != 0 || !q.gen.CompareAndSwap(g, g+1) {
		g = q.enterSlow()
	}
	return g
}

// leave ends the post entered at g: a release store (a plain MOV on
// amd64), enough because only earlier accesses must be visible before
// it: waitGen's load and enterSlow's CAS pair with it.
func (q *QP) leave(g uint64) { release.Store64(q.genWord(), g+2) }

// genWord is gen's 64-bit word (atomic.Uint64 is exactly one uint64).
func (q *QP) genWord() *uint64 { return (*uint64)(unsafe.Pointer(&q.gen)) }

// atomic.Uint64 must be one bare uint64 for genWord: both lines fail to
// compile otherwise.
var (
	_ [unsafe.Sizeof(atomic.Uint64{}) - 8]byte
	_ [8 - unsafe.Sizeof(atomic.Uint64{})]byte
)

// enterSlow waits for another goroutine's PostSend on this QP to leave.
func (q *QP) enterSlow() uint64 {
	for {
		g := q.gen.Load()
		if g&1 == 0 && q.gen.CompareAndSwap(g, g+1) {
			return g
		}
		runtime.Gosched()
	}
}

func (q *QP) post(wr *rdma.WorkRequest) error {
	s := rdma.QPState(q.state.Load())
	switch s {
	case rdma.QPReadyToSend, rdma.QPError:
	case rdma.QPClosed:
		return errQPClosed
	default:
		return errNotRTS
	}
	if q.sqPosted-q.sqRetired.Load() >= q.sendDepth { // pairs with retire's store
		return rdma.ErrSendQueueFull
	}
	if s == rdma.QPError {
		return q.fail(wr, rdma.StatusFlushed)
	}
	switch wr.Op {
	case rdma.OpWrite:
		return q.write(wr)
	case rdma.OpWriteImm, rdma.OpSend:
		return q.message(wr)
	case rdma.OpRead:
		return q.read(wr)
	case rdma.OpCompareAndSwap, rdma.OpFetchAndAdd:
		return q.atomic(wr)
	}
	return q.fail(wr, rdma.StatusLocalQPOp)
}

func (q *QP) signaled(wr *rdma.WorkRequest) bool {
	return q.signalAll || wr.Flags&rdma.FlagSignaled != 0
}

// fail completes wr with an error status; nothing was done.
func (q *QP) fail(wr *rdma.WorkRequest, st rdma.Status) error {
	if err := q.sendCQ.reserve(); err != nil {
		return err
	}
	q.record(wr, st, 0, true)
	return nil
}

// record takes wr's send-queue entry and, if it completes, queues its
// completion (whose CQ credit the caller holds).
func (q *QP) record(wr *rdma.WorkRequest, st rdma.Status, n uint32, completes bool) {
	idx := q.sqPosted
	q.sqPosted++
	if st != rdma.StatusSuccess && st != rdma.StatusFlushed {
		// As verbs: an error completion moves the QP to ERR; later
		// requests complete with StatusFlushed.
		if q.state.CompareAndSwap(uint32(rdma.QPReadyToSend), uint32(rdma.QPError)) {
			liveChanged()
			if st == rdma.StatusRemoteAccess {
				go q.hangUp(wr.Remote) // cold path: the peer's QP goes to ERR too (grant.go)
			}
		}
	}
	if !completes {
		return
	}
	q.compRing[q.compTail&q.compMask] = idx // read by retire after Push publishes
	q.compTail++
	q.sendCQ.q.Push(rdma.Completion{ID: wr.ID, Status: st, Op: wr.Op, QPN: q.num, Bytes: n})
}

// localAt is Device.localAt with the last lkey's region cached (see
// QP.ltab). Inside a post only.
func (q *QP) localAt(sge rdma.SGE, need rdma.Access) ([]byte, bool) {
	t := q.dev.keys.Load()
	r := q.lreg
	if t != q.ltab || sge.LKey != q.lkey {
		r = t.m[sge.LKey]
		q.ltab, q.lkey, q.lreg = t, sge.LKey, r
	}
	return r.at(sge, need)
}

// source is the payload of a WRITE, WRITE_WITH_IMM or SEND.
func (q *QP) source(wr *rdma.WorkRequest) ([]byte, rdma.Status) {
	if wr.Flags&rdma.FlagInline != 0 {
		if len(wr.Inline) > q.maxInline {
			return nil, rdma.StatusLocalQPOp
		}
		return wr.Inline, rdma.StatusSuccess
	}
	b, ok := q.localAt(wr.Local, 0)
	if !ok {
		return nil, rdma.StatusLocalProtection
	}
	return b, rdma.StatusSuccess
}

// put copies src into dst (the peer's memory); 8 bytes at an 8-aligned
// address go in one single-copy-atomic release store (release.Store64), the
// stamp store the doc of PostSend describes: every byte stored before it,
// by this and earlier requests of the QP, is visible before it. Its paired
// load is the 8-byte READ in read and the ring reader's atomic load.
func put(dst, src []byte, aligned bool) {
	if len(src) == 8 && aligned {
		release.Store64((*uint64)(unsafe.Pointer(&dst[0])), binary.NativeEndian.Uint64(src))
		return
	}
	copy(dst, src)
}

func (q *QP) write(wr *rdma.WorkRequest) error {
	src, st := q.source(wr)
	if st != rdma.StatusSuccess {
		return q.fail(wr, st)
	}
	if len(src) > maxMsgSize {
		return q.fail(wr, rdma.StatusRemoteInvalidRequest)
	}
	dst, st := q.remoteAt(wr.Remote, uint64(len(src)), rdma.AccessRemoteWrite)
	if st != rdma.StatusSuccess {
		return q.fail(wr, st)
	}
	sig := q.signaled(wr)
	if sig {
		if err := q.sendCQ.reserve(); err != nil {
			return err
		}
	}
	put(dst, src, wr.Remote.Addr&7 == 0)
	q.record(wr, rdma.StatusSuccess, uint32(len(src)), sig)
	return nil
}

// message carries out a SEND or a WRITE_WITH_IMM: it claims the peer's next
// posted receive (none: StatusRNRRetryExceeded), does the write or copies
// the payload into the receive queue's slot, and publishes the message for
// the peer's RecvCQ.
func (q *QP) message(wr *rdma.WorkRequest) error {
	src, st := q.source(wr)
	if st != rdma.StatusSuccess {
		return q.fail(wr, st)
	}
	out := q.out.Load()
	if out == nil { // only between a peer's death and our state store
		return q.fail(wr, rdma.StatusFlushed)
	}
	var dst []byte
	if wr.Op == rdma.OpWriteImm {
		if len(src) > maxMsgSize {
			return q.fail(wr, rdma.StatusRemoteInvalidRequest)
		}
		if dst, st = q.remoteAt(wr.Remote, uint64(len(src)), rdma.AccessRemoteWrite); st != rdma.StatusSuccess {
			return q.fail(wr, st)
		}
	} else if len(src) > out.view.maxSend {
		return q.fail(wr, rdma.StatusRemoteInvalidRequest)
	}
	// Claiming is a side effect on the peer, and it may still fail (RNR), so
	// hold a completion credit whether or not wr is signalled.
	if err := q.sendCQ.reserve(); err != nil {
		return err
	}
	i, room, ok := out.view.claim()
	if !ok {
		q.record(wr, rdma.StatusRNRRetryExceeded, 0, true)
		return nil
	}
	n := uint32(len(src))
	if wr.Op == rdma.OpWriteImm {
		put(dst, src, wr.Remote.Addr&7 == 0)
		out.view.publish(i, kindWriteImm, n, wr.Imm)
	} else {
		if n > room {
			out.view.publish(i, kindTooLong, n, wr.Imm)
			q.record(wr, rdma.StatusRemoteInvalidRequest, 0, true)
			return nil
		}
		copy(out.view.payload(i), src)
		out.view.publish(i, kindSend, n, wr.Imm)
	}
	sig := q.signaled(wr)
	if !sig {
		q.sendCQ.unreserve()
	}
	q.record(wr, rdma.StatusSuccess, n, sig)
	return nil
}

func (q *QP) read(wr *rdma.WorkRequest) error {
	if wr.Flags&rdma.FlagInline != 0 {
		return q.fail(wr, rdma.StatusLocalQPOp)
	}
	dst, ok := q.localAt(wr.Local, rdma.AccessLocalWrite)
	if !ok {
		return q.fail(wr, rdma.StatusLocalProtection)
	}
	if len(dst) > maxMsgSize {
		return q.fail(wr, rdma.StatusRemoteInvalidRequest)
	}
	src, st := q.remoteAt(wr.Remote, uint64(len(dst)), rdma.AccessRemoteRead)
	if st != rdma.StatusSuccess {
		return q.fail(wr, st)
	}
	sig := q.signaled(wr)
	if sig {
		if err := q.sendCQ.reserve(); err != nil {
			return err
		}
	}
	if len(dst) == 8 && wr.Remote.Addr&7 == 0 {
		// One atomic load: pairs with put's atomic store of a stamp.
		binary.NativeEndian.PutUint64(dst, atomic.LoadUint64((*uint64)(unsafe.Pointer(&src[0]))))
	} else {
		copy(dst, src)
	}
	q.record(wr, rdma.StatusSuccess, uint32(len(dst)), sig)
	return nil
}

// atomic runs COMPARE_AND_SWAP or FETCH_AND_ADD as a CPU atomic on the
// peer's mapped word and stores the original value, native endian, in the
// local 8-byte buffer.
func (q *QP) atomic(wr *rdma.WorkRequest) error {
	if wr.Flags&rdma.FlagInline != 0 {
		return q.fail(wr, rdma.StatusLocalQPOp)
	}
	if wr.Local.Len != 8 {
		return q.fail(wr, rdma.StatusLocalLength)
	}
	dst, ok := q.localAt(wr.Local, rdma.AccessLocalWrite)
	if !ok {
		return q.fail(wr, rdma.StatusLocalProtection)
	}
	if wr.Remote.Addr&7 != 0 {
		return q.fail(wr, rdma.StatusRemoteInvalidRequest)
	}
	w, st := q.remoteAt(wr.Remote, 8, rdma.AccessRemoteAtomic)
	if st != rdma.StatusSuccess {
		return q.fail(wr, st)
	}
	sig := q.signaled(wr)
	if sig {
		if err := q.sendCQ.reserve(); err != nil {
			return err
		}
	}
	p := (*uint64)(unsafe.Pointer(&w[0]))
	var orig uint64
	if wr.Op == rdma.OpFetchAndAdd {
		orig = atomic.AddUint64(p, wr.Add) - wr.Add
	} else {
		for {
			orig = atomic.LoadUint64(p)
			if orig != wr.Compare || atomic.CompareAndSwapUint64(p, orig, wr.Swap) {
				break
			}
		}
	}
	binary.NativeEndian.PutUint64(dst, orig)
	q.record(wr, rdma.StatusSuccess, 8, sig)
	return nil
}
