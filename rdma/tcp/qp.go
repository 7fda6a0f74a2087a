package tcp

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
)

// QP is a reliable-connected queue pair over two TCP connections: the one it
// dials carries its requests to the peer and the peer's responses back; the
// one the peer dials carries the peer's requests, which this QP's responder
// applies to this device's regions. It implements rdma.QueuePair.
//
// PostSend and PostRecv are meant for one goroutine each at a time, as a
// poll loop does; concurrent callers are serialised by an atomic flag (one
// uncontended compare-and-swap per call).
type QP struct {
	dev       *Device
	num       uint32
	nonce     uint64
	cfg       rdma.QPConfig
	scq, rcq  *CQ
	maxInline int
	log       zerolog.Logger

	state atomic.Uint32 // rdma.QPState; stored under mu, loaded anywhere

	// Send queue. The posting goroutine fills sq[pos&sqMask] and then
	// publishes posted = pos+1 (paired with the Loads in reap and drain);
	// the consumer holding cmu completes entries in order and publishes
	// consumed (the watchdog Loads it). An entry is free again once a
	// completion at or after it is polled: the poller stores retired,
	// PostSend Loads it for the full check.
	_ [64]byte
	// posted: atomic loads; the batch's store is a release store (a plain
	// MOV on amd64, release.Store64): the post's publish (wpos, an XCHG)
	// right after it makes it visible before anything can answer it.
	posted   uint64
	_        [56]byte
	consumed atomic.Uint64
	_        [56]byte
	retired  atomic.Uint64
	_        [56]byte
	sq       []sqEntry
	sqDst    []sqDst // by the same index as sq
	sqMask   uint64
	sqDepth  uint64
	postBusy uint64 // 1 while a post (or Close) runs: spinAcquire, then released by postDone
	// ackStride: one WRITE or SEND in this many asks for an answer at once
	// (reqAckNow), an eighth of the send queue; sinceAck counts them.
	// Posting goroutine only.
	ackStride uint64
	sinceAck  uint64
	list      openList // PostSendBatch's WRITE list being filled
	// The poster's own: whether a PostSendBatch runs, the completion
	// credits taken from the CQ and not used yet (send.go, reserve), the
	// source region a batch keeps pinned (endBatch).
	inBatch bool
	credits int
	pin     *region
	// npos is the next post index: posted, or ahead of it by the requests
	// of a PostSendBatch, which stores posted once before it publishes.
	npos uint64
	// The poster's fields above (written per request) and the reaper's
	// below (cmu, compTail, unused: written per response) on lines of
	// their own: WRITE lists' state put npos and credits on cmu's line,
	// a line moving between the cores at every response.
	_ [64]byte
	// due counts the READs and atomics posted and not completed: answers a
	// poster waits for, which the reaper spins for (answerDue).
	due atomic.Int64
	cmu sync.Mutex // one consumer of sq at a time: the reaper or a drainer
	// compRing holds the post index of every send completion queued and not
	// yet polled, in push order: written under cmu, read by the poller.
	compRing []uint64
	compTail uint64 // under cmu
	unused   int    // under cmu: credits of silent completions, for giveUnused
	compHead uint64 // poller only

	// Receive queue, the same way round: PostRecv publishes rqPosted, the
	// responder or a drainer holding rmu consumes.
	rqPosted   atomic.Uint64
	rqConsumed atomic.Uint64
	rq         []rdma.RecvRequest
	rqMask     uint64
	rqDepth    uint64
	recvBusy   uint64 // as postBusy, for PostRecv
	rmu        sync.Mutex

	// Set under mu before state becomes RTS; read by PostSend after it loads
	// state (the atomic orders them).
	tx     *txRing
	maxMsg uint32

	// failStatus is what the first request drained after a failure
	// completes with; every later one is StatusFlushed.
	failStatus atomic.Uint32

	mu         sync.Mutex // control path: Connect, attach, fail, Close
	out, in    *rawConn
	remote     rdma.Endpoint
	haveRemote bool
	inQPN      uint32
	inNonce    uint64
	stop       chan struct{} // closed on ERR, or by Close after its linger
	stopped    atomic.Bool   // set when stop is closed by Close
	reapDone   chan struct{} // closed when the reaper exits
	workers    sync.WaitGroup
	closeOnce  sync.Once

	// grants: nil until the first Grant (unconfined), then what the peer
	// may reach (grant.go); grantMu serialises Grant calls.
	grants  atomic.Pointer[grantTable]
	grantMu sync.Mutex

	// watchdog goroutine only
	wdConsumed uint64
	wdSince    time.Time
}

// sqEntry is one posted request, 16 bytes: the poster writes one per
// request and the reaper reads it on another core, so four share a cache
// line. A READ's or an atomic's destination is apart, in sqDst.
type sqEntry struct {
	id       uint64
	len      uint32
	op       rdma.Opcode
	status   rdma.Status // preset: a local error, or StatusFlushed for a post in ERR
	preset   bool
	signaled bool
}

// due reports whether e is counted in QP.due: a READ or an atomic that
// went on the wire.
func (e *sqEntry) due() bool { return !e.preset && (e.op == rdma.OpRead || e.op.IsAtomic()) }

// sqDst is where a READ's or an atomic's result goes.
type sqDst struct {
	laddr uint64
	lkey  uint32
}

var _ [16 - unsafe.Sizeof(sqEntry{})]byte
var _ [unsafe.Sizeof(sqEntry{}) - 16]byte

var _ rdma.QueuePair = (*QP)(nil)

var (
	errNotConnected = fmt.Errorf("%w: queue pair is not connected", rdma.ErrQPState)
	errAckTimeout   = errors.New("tcp: no answer from the peer within AckTimeout")
	errNak          = errors.New("tcp: peer refused a request")
	errLocal        = errors.New("tcp: local error on a work request")
)

func newQP(d *Device, num uint32, cfg rdma.QPConfig, scq, rcq *CQ) *QP {
	q := &QP{
		dev:       d,
		num:       num,
		nonce:     randUint64(),
		cfg:       cfg,
		scq:       scq,
		rcq:       rcq,
		maxInline: cfg.MaxInline,
		stop:      make(chan struct{}),
		reapDone:  make(chan struct{}),
	}
	if q.maxInline == 0 {
		q.maxInline = maxInline
	}
	if cfg.Confined {
		q.grants.Store(&grantTable{})
	}
	q.log = d.log.With().Uint32("qpn", num).Logger()
	n := pow2(cfg.SendDepth)
	q.sq, q.sqMask, q.sqDepth = make([]sqEntry, n), uint64(n-1), uint64(cfg.SendDepth)
	q.sqDst = make([]sqDst, n)
	q.ackStride = max(1, q.sqDepth/8)
	q.compRing = make([]uint64, n)
	n = pow2(cfg.RecvDepth)
	q.rq, q.rqMask, q.rqDepth = make([]rdma.RecvRequest, n), uint64(n-1), uint64(cfg.RecvDepth)
	q.failStatus.Store(uint32(rdma.StatusFlushed))
	return q
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func (q *QP) Num() uint32 { return q.num }

func (q *QP) State() rdma.QPState { return rdma.QPState(q.state.Load()) }

func (q *QP) LocalEndpoint() rdma.Endpoint {
	return rdma.Endpoint{
		Provider: rdma.ProviderTCP,
		HostID:   q.dev.cfg.HostID,
		QPN:      q.num,
		Nonce:    q.nonce,
		Addr:     q.dev.addr,
	}
}

// Connect dials the peer's device, names the peer QP by number and nonce,
// and starts the goroutines that write requests and read responses. The
// peer calls Connect with this QP's endpoint likewise, which gives it the
// connection for its requests. On failure the QP moves to ERR.
func (q *QP) Connect(ctx context.Context, remote rdma.Endpoint) error {
	q.mu.Lock()
	switch st := rdma.QPState(q.state.Load()); st {
	case rdma.QPReset:
	case rdma.QPClosed:
		q.mu.Unlock()
		return rdma.ErrClosed
	default:
		q.mu.Unlock()
		return fmt.Errorf("%w: Connect in state %s", rdma.ErrQPState, st)
	}
	switch {
	case remote.Provider != rdma.ProviderTCP:
		q.mu.Unlock()
		return fmt.Errorf("%w: tcp QP given endpoint %s", rdma.ErrProviderMismatch, remote)
	case remote.Addr == "":
		q.mu.Unlock()
		return fmt.Errorf("%w: tcp endpoint %s has no address", rdma.ErrMalformed, remote)
	}
	var err error
	switch {
	case q.in != nil && (q.inQPN != remote.QPN || q.inNonce != remote.Nonce):
		err = fmt.Errorf("%w: QP %d is already reached by qp%d, not %s", rdma.ErrPeerRefused, q.num, q.inQPN, remote)
	}
	if err != nil {
		q.mu.Unlock()
		q.fail(rdma.StatusFlushed, err)
		return err
	}
	q.remote, q.haveRemote = remote, true
	q.state.Store(uint32(rdma.QPInit))
	q.mu.Unlock()

	c, peerMax, err := q.dial(ctx, remote)
	if err != nil {
		q.fail(rdma.StatusFlushed, err)
		return err
	}
	q.mu.Lock()
	if st := rdma.QPState(q.state.Load()); st != rdma.QPInit {
		q.mu.Unlock()
		c.Close()
		if st == rdma.QPClosed {
			return rdma.ErrClosed
		}
		return fmt.Errorf("%w: QP moved to %s while connecting", rdma.ErrQPState, st)
	}
	rc, err := newRawConn(c, q.dev.poller, 2, q.dev.cfg.ReadSpins)
	if err == nil {
		err = rc.block()
	}
	if err != nil {
		q.mu.Unlock()
		c.Close()
		q.fail(rdma.StatusFlushed, err)
		return err
	}
	rc.spinWhen = q.answerDue
	q.out = rc
	q.maxMsg = min(uint32(q.dev.cfg.MaxMsgSize), peerMax)
	q.tx = newTxRing(q.dev.cfg.SendBuffer)
	q.state.Store(uint32(rdma.QPReadyToReceive))
	q.workers.Add(2)
	go q.reap(rc)
	go q.flush(rc, q.tx)
	q.state.Store(uint32(rdma.QPReadyToSend))
	q.mu.Unlock()
	q.log.Debug().Stringer("remote", remote).Msg("connected")
	return nil
}

func (q *QP) dial(ctx context.Context, remote rdma.Endpoint) (net.Conn, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, q.dev.cfg.ConnectTimeout)
	defer cancel()
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", remote.Addr)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: dial %s: %w", rdma.ErrPeerRefused, remote.Addr, err)
	}
	setNoDelay(c)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fail := func(err error) (net.Conn, uint32, error) {
		c.Close()
		return nil, 0, err
	}
	h := hello{host: q.dev.cfg.HostID, dstQPN: remote.QPN, srcQPN: q.num,
		srcNonce: q.nonce, maxMsg: uint32(q.dev.cfg.MaxMsgSize)}
	h.sign(remote.Nonce)
	if _, err := c.Write(h.marshal()); err != nil {
		return fail(fmt.Errorf("%w: send hello to %s: %w", ErrHandshake, remote, err))
	}
	var rb [replyLen]byte
	if _, err := io.ReadFull(c, rb[:]); err != nil {
		return fail(fmt.Errorf("%w: reply from %s: %w", ErrHandshake, remote, err))
	}
	status, peerMax, mac, err := decodeReply(rb[:])
	if err != nil {
		return fail(err)
	}
	switch status {
	case hsOK:
		if want := replyMAC(remote.Nonce, status, peerMax, &h); !hmac.Equal(want[:], mac[:]) {
			return fail(fmt.Errorf("%w: %s accepted without proving its nonce", ErrHandshake, remote))
		}
	case hsNotFound:
		return fail(fmt.Errorf("%w: %s", rdma.ErrPeerNotFound, remote))
	case hsBadVersion:
		return fail(fmt.Errorf("%w: %s", ErrHandshakeVersion, remote))
	default:
		return fail(fmt.Errorf("%w: %s", rdma.ErrPeerRefused, remote))
	}
	if !stop() {
		return fail(fmt.Errorf("%w: connecting to %s: %w", ErrHandshake, remote, ctx.Err()))
	}
	c.SetDeadline(time.Time{})
	return c, peerMax, nil
}

// answerDue reports whether the reaper should spin for responses (up to
// dueSpins empty reads, rawconn.go): a READ or an atomic is outstanding,
// whose poster waits for the answer (a claim on a remote home). Otherwise
// it waits for the poller at once: the bulk ACKs of a feed's unsignalled
// WRITEs are not worth a spinning thread, which on a small machine takes a
// core from the goroutines that carry the ticks.
func (q *QP) answerDue() bool { return q.due.Load() > 0 }

// attachIncoming gives the QP the connection a peer dialled, if the QP can
// take it, and returns it wrapped for one user (the responder). Called by
// the device's handshake goroutine.
func (q *QP) attachIncoming(c net.Conn, h hello) (uint8, *rawConn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch rdma.QPState(q.state.Load()) {
	case rdma.QPError, rdma.QPClosed:
		return hsRefused, nil
	}
	if q.in != nil {
		return hsRefused, nil
	}
	if q.haveRemote && (q.remote.QPN != h.srcQPN || q.remote.Nonce != h.srcNonce) {
		return hsRefused, nil
	}
	rc, err := newRawConn(c, q.dev.poller, 1, q.dev.cfg.ReadSpins)
	if err != nil {
		q.log.Warn().Err(err).Msg("incoming connection")
		return hsRefused, nil
	}
	q.in, q.inQPN, q.inNonce = rc, h.srcQPN, h.srcNonce
	return hsOK, rc
}

// fail moves the QP to ERR (unless it is already in ERR or CLOSED), closes
// its connections and completes what is outstanding: the first request with
// st, the rest with StatusFlushed. It must not be called with cmu or rmu
// held.
func (q *QP) fail(st rdma.Status, cause error) {
	q.mu.Lock()
	switch rdma.QPState(q.state.Load()) {
	case rdma.QPClosed: // Close shuts the connections itself
		q.mu.Unlock()
		return
	case rdma.QPError: // marked by markError, or failed before: finish the job
	default:
		q.failStatus.Store(uint32(st))
		q.state.Store(uint32(rdma.QPError))
		close(q.stop)
	}
	out, in := q.out, q.in
	q.mu.Unlock()
	q.log.Warn().Err(cause).Stringer("status", st).Msg("queue pair moved to ERR")
	if out != nil {
		out.shutdown()
	}
	if in != nil {
		in.shutdown()
	}
	q.drain()
	q.drainRecv()
}

// markError moves the QP to ERR before an error completion becomes visible,
// so that a poller that sees it cannot post into a QP still running; the
// caller then calls fail, without cmu, to close and drain.
func (q *QP) markError() {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch rdma.QPState(q.state.Load()) {
	case rdma.QPError, rdma.QPClosed:
		return
	}
	q.failStatus.Store(uint32(rdma.StatusFlushed))
	q.state.Store(uint32(rdma.QPError))
	close(q.stop)
}

// drain completes every posted, unanswered request: the first with
// failStatus, the others with StatusFlushed.
func (q *QP) drain() {
	q.cmu.Lock()
	defer q.cmu.Unlock()
	for {
		pos := q.consumed.Load()
		if pos == atomic.LoadUint64(&q.posted) {
			return
		}
		e := &q.sq[pos&q.sqMask]
		st := e.status
		if !e.preset {
			st = rdma.Status(q.failStatus.Swap(uint32(rdma.StatusFlushed)))
		}
		q.complete(e, pos, st)
		q.giveUnused()
	}
}

// complete retires sq entry pos from the wire's point of view and queues
// its completion if it is signalled or failed. Called with cmu held.
func (q *QP) complete(e *sqEntry, pos uint64, st rdma.Status) {
	c := rdma.Completion{ID: e.id, Status: st, Op: e.op, QPN: q.num, Bytes: e.len}
	if st != rdma.StatusSuccess {
		c.Bytes = 0
	}
	push := e.signaled || st != rdma.StatusSuccess
	if e.due() {
		q.due.Add(-1)
	}
	q.consumed.Store(pos + 1) // the watchdog Loads it
	if !push {
		q.unused++ // giveUnused returns them, one atomic per response
		return
	}
	q.compRing[q.compTail&q.sqMask] = pos
	q.compTail++
	q.scq.push(c) // the swcq's release store publishes compRing to the poller
}

// giveUnused gives the CQ back the credits of requests that completed
// without a completion. Called with cmu held, after complete.
func (q *QP) giveUnused() {
	if q.unused > 0 {
		q.scq.give(q.unused)
		q.unused = 0
	}
}

// retire frees the send-queue entries up to the completion just polled.
// Poller only.
func (q *QP) retire() {
	pos := q.compRing[q.compHead&q.sqMask]
	q.compHead++
	q.retired.Store(pos + 1) // PostSend Loads it for room
}

// drainRecv completes every posted receive with StatusFlushed.
func (q *QP) drainRecv() {
	q.rmu.Lock()
	defer q.rmu.Unlock()
	for {
		pos := q.rqConsumed.Load()
		if pos == q.rqPosted.Load() {
			return
		}
		rr := q.rq[pos&q.rqMask]
		q.rqConsumed.Store(pos + 1)
		q.rcq.push(rdma.Completion{ID: rr.ID, Status: rdma.StatusFlushed, Op: rdma.OpRecv, QPN: q.num})
	}
}

// checkProgress is the watchdog's look at the QP: the oldest outstanding
// request unanswered for timeout fails the QP with StatusRetryExceeded.
func (q *QP) checkProgress(now time.Time, timeout time.Duration) {
	if rdma.QPState(q.state.Load()) != rdma.QPReadyToSend {
		return
	}
	c := q.consumed.Load()
	if c == atomic.LoadUint64(&q.posted) || c != q.wdConsumed || q.wdSince.IsZero() {
		q.wdConsumed, q.wdSince = c, now
		return
	}
	if now.Sub(q.wdSince) >= timeout {
		q.fail(rdma.StatusRetryExceeded, errAckTimeout)
	}
}

// Close moves the QP to CLOSED: later posts fail with rdma.ErrClosed. A
// connected QP first lingers, up to Config.CloseLinger, until the peer has
// answered every request already posted (as a NIC would have sent them at
// post time); then Close closes its connections, waits for its goroutines
// and flushes what is still outstanding. Idempotent; safe while others
// poll.
func (q *QP) Close() error {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		prev := rdma.QPState(q.state.Load())
		q.state.Store(uint32(rdma.QPClosed))
		q.mu.Unlock()
		if prev == rdma.QPReadyToSend {
			deadline := time.Now().Add(q.dev.cfg.CloseLinger)
			for q.consumed.Load() != atomic.LoadUint64(&q.posted) && time.Now().Before(deadline) {
				select {
				case <-q.reapDone:
					deadline = time.Time{} // the connection is gone: nothing more will be answered
				case <-time.After(time.Millisecond):
				}
			}
		}
		spinAcquire(&q.postBusy) // a post now sees CLOSED before it reserves
		q.scq.give(q.credits)
		q.credits = 0
		postDone(&q.postBusy)
		q.mu.Lock()
		q.failStatus.Store(uint32(rdma.StatusFlushed))
		q.stopped.Store(true) // PostSend Loads it after publishing
		if prev != rdma.QPError {
			close(q.stop)
		}
		out, in := q.out, q.in
		q.mu.Unlock()
		if out != nil {
			out.shutdown()
		}
		if in != nil {
			in.shutdown()
		}
		q.workers.Wait()
		q.drain()
		q.drainRecv()
		q.dev.dropQP(q)
	})
	return nil
}

// spinAcquire takes a posting flag; uncontended it is one CAS.
func spinAcquire(f *uint64) {
	for !atomic.CompareAndSwapUint64(f, 0, 1) {
		runtime.Gosched()
	}
}

// postDone releases what spinAcquire took: a release store, not an XCHG
// (nothing after it must wait for it to be seen); the next CAS pairs with
// it.
func postDone(f *uint64) { release.Store64(f, 0) }
