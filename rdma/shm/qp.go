package shm

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// QP is a reliable-connected queue pair of a Device. It implements
// rdma.QueuePair.
//
// Concurrency: PostSend calls of one QP are serialised (see PostSend), and
// one goroutine posts receives at a time (PostRecv locks; it is not on the
// hot path); the RecvCQ's poller drains its receives. Close, Connect and
// State are safe from any goroutine at any time, including while another
// goroutine posts or polls.
//
// Unmapping safely: PostSend and PostSendBatch make gen odd on entry (a
// CAS: a full fence, so their loads of state and tables cannot pass it)
// and even on exit (a release store: every access of the post is visible
// before it). A control path that unmaps memory a post might touch (a
// peer's region on regionDel, everything on ERR or Close) first
// unpublishes it (state store or table swap, sequentially consistent),
// then waits until gen is even or has moved, then unmaps. Both sides fence
// between their store and their load, so a post either saw the
// unpublished state or is waited for; a SIGSEGV is impossible, and the
// waiter never starves behind a stream of posts.
type QP struct {
	dev       *Device
	num       uint32
	nonce     uint64
	psn       uint32
	sendCQ    *CQ
	recvCQ    *CQ
	sendDepth uint64
	recvDepth uint64
	maxInline int
	signalAll bool

	state atomic.Uint32 // rdma.QPState

	// grants is nil until the first Grant (the peer is sent every region
	// with a remote right), then what the peer may reach (grant.go). Under
	// dev.mu.
	grants map[*Region]grant
	// gen is odd while a PostSend runs; each PostSend adds 2 (CAS in,
	// release store out). See waitIdle.
	gen atomic.Uint64

	// Lookup caches of the posting goroutine (read and written inside a
	// post only, so gen serialises them): the last remote table and rkey
	// with its region, the last key table and lkey with its region. A
	// table is immutable and a new one is a new pointer (the cache keeps
	// the old one alive, so the address cannot be reused), so comparing
	// pointers finds every change; the region of a stale entry is never
	// touched. Unmapping waits for gen as before.
	rtab *remoteTable
	rkey uint32
	rreg *remoteRegion
	ltab *keyTable
	lkey uint32
	lreg *Region

	// Send-queue accounting, as verbs: a request occupies the send queue
	// from PostSend until a completion of this QP posted at or after it is
	// polled. sqPosted, compTail and compRing are written by the poster;
	// compHead by the poller; sqRetired is the poller's store, loaded by the
	// poster.
	sqPosted  uint64
	compTail  uint64
	compRing  []uint64 // post index of each queued completion, in push order
	compMask  uint64
	compHead  uint64
	sqRetired atomic.Uint64

	// What the dialed connection mapped: the peer's regions and the peer's
	// receive queue. The hot path loads them; the control path swaps them.
	remote atomic.Pointer[remoteTable]
	out    atomic.Pointer[outQueue]

	// Our receive queue, shared with the peer that connects to us.
	in       inQueue
	recvMu   sync.Mutex
	recvRing []rdma.RecvRequest
	recvMask uint64
	// recvPosted: stored by PostRecv, loaded by drain. recvDone: stored by
	// drain (the poller), loaded by PostRecv for room.
	recvPosted atomic.Uint64
	recvDone   atomic.Uint64

	ctlMu    sync.Mutex // dial, accepted, peer names, remote/out swaps
	dial     *ctlConn   // our connection to the peer's device
	accepted *ctlConn   // the peer's connection to our device
	// The peer Connect named, and the peer that connected to us (from its
	// hello): they must be the same QP.
	peerQPN, accQPN     uint32
	peerNonce, accNonce uint64
	havePeer            bool
	peerAddr            string // the peer device's socket: names shared mappings
	readerWG            sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

type inQueue struct {
	m    *shmem.Mapping
	view *queue
}

type outQueue struct {
	view    *queue
	mapping []byte
}

var (
	_ rdma.QueuePair   = (*QP)(nil)
	_ rdma.BatchPoster = (*QP)(nil)
)

// CreateQP makes a queue pair in RESET. Its CQs must be CQs of this device.
func (d *Device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	if err := d.errIfClosed(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(d.Caps()); err != nil {
		return nil, err
	}
	scq, ok1 := cfg.SendCQ.(*CQ)
	rcq, ok2 := cfg.RecvCQ.(*CQ)
	if !ok1 || !ok2 || scq.dev != d || rcq.dev != d {
		return nil, fmt.Errorf("%w: shm QP needs CQs made by the same shm device", rdma.ErrInvalidConfig)
	}
	if scq.closed.Load() || rcq.closed.Load() {
		return nil, fmt.Errorf("%w: shm QP on a closed CQ", rdma.ErrClosed)
	}
	q := &QP{
		dev:       d,
		nonce:     random64(),
		psn:       uint32(random64() & 0xffffff),
		sendCQ:    scq,
		recvCQ:    rcq,
		sendDepth: uint64(cfg.SendDepth),
		recvDepth: uint64(cfg.RecvDepth),
		maxInline: cfg.MaxInline,
		signalAll: cfg.SignalAll,
	}
	if q.maxInline == 0 {
		q.maxInline = maxInline
	}
	if cfg.Confined {
		q.grants = map[*Region]grant{}
	}
	ring := pow2(cfg.SendDepth)
	q.compRing = make([]uint64, ring)
	q.compMask = uint64(ring - 1)
	qcap := pow2(max(cfg.RecvDepth, 1))
	q.recvRing = make([]rdma.RecvRequest, qcap)
	q.recvMask = uint64(qcap - 1)
	m, err := shmem.Alloc("shm-recvq", queueBytes(qcap, d.maxSend))
	if err != nil {
		return nil, fmt.Errorf("shm: receive queue: %w", err)
	}
	q.in = inQueue{m: m, view: newQueueView(m.Bytes(), qcap, d.maxSend)}
	q.in.view.initHeader()
	q.remote.Store(emptyRemote)
	q.state.Store(uint32(rdma.QPReset))

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		_ = m.Close()
		return nil, fmt.Errorf("%w: shm device", rdma.ErrClosed)
	}
	old := *d.qps.Load()
	if len(old) > 1<<31 {
		_ = m.Close()
		return nil, errors.New("shm: out of queue pair numbers")
	}
	qps := make([]*QP, len(old), len(old)+1)
	copy(qps, old)
	q.num = uint32(len(qps))
	qps = append(qps, q)
	d.qps.Store(&qps)
	rcq.addRecvQP(q)
	return q, nil
}

func pow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// Num is the queue pair number.
func (q *QP) Num() uint32 { return q.num }

// State is the current state.
func (q *QP) State() rdma.QPState { return rdma.QPState(q.state.Load()) }

// LocalEndpoint is what the peer passes to its Connect.
func (q *QP) LocalEndpoint() rdma.Endpoint {
	return rdma.Endpoint{
		Provider: rdma.ProviderShm,
		HostID:   q.dev.hostID,
		QPN:      q.num,
		PSN:      q.psn,
		Nonce:    q.nonce,
		Addr:     q.dev.addr,
	}
}

// Connect walks RESET → INIT → RTR → RTS: it connects to the peer's
// device, checks its credentials, maps the peer's receive queue and every
// region the peer grants a remote right, and from then on follows the
// peer's registrations. An endpoint of another provider or host is refused
// with the QP left in RESET; a failure after that moves the QP to ERR.
func (q *QP) Connect(ctx context.Context, remote rdma.Endpoint) error {
	switch {
	case remote.Provider != rdma.ProviderShm:
		return fmt.Errorf("%w: shm QP given a %q endpoint", rdma.ErrProviderMismatch, remote.Provider)
	case remote.HostID != q.dev.hostID:
		return fmt.Errorf("%w: %q, we are %q", ErrOtherHost, remote.HostID, q.dev.hostID)
	case remote.Addr == "" || remote.QPN == 0:
		return fmt.Errorf("%w: shm endpoint without socket or QPN", rdma.ErrMalformed)
	}
	if !q.state.CompareAndSwap(uint32(rdma.QPReset), uint32(rdma.QPInit)) {
		if q.State() == rdma.QPClosed {
			return errQPClosed
		}
		return fmt.Errorf("%w: Connect in %s", rdma.ErrQPState, q.State())
	}
	err := q.namePeer(remote)
	if err == nil {
		err = q.connect(ctx, remote)
	}
	if err != nil {
		q.toError()
		q.dev.log.Warn().Err(err).Uint32("qpn", q.num).Stringer("peer", remote).Msg("shm: connect failed")
		return err
	}
	q.dev.log.Debug().Uint32("qpn", q.num).Stringer("peer", remote).Msg("shm: QP connected")
	return nil
}

func (q *QP) connect(ctx context.Context, remote rdma.Endpoint) error {
	d := q.dev
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "unixpacket", remote.Addr)
	if err != nil {
		return fmt.Errorf("%w: dial %s: %w", rdma.ErrPeerNotFound, remote.Addr, err)
	}
	c := newCtlConn(nc.(*net.UnixConn))
	q.ctlMu.Lock()
	if q.State() == rdma.QPClosed {
		q.ctlMu.Unlock()
		c.close()
		return errQPClosed
	}
	q.dial = c
	q.ctlMu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := d.checkPeer(c); err != nil {
		c.close()
		return err
	}
	deadline, _ := ctx.Deadline()
	hello := frame{typ: frameHello, dstQPN: remote.QPN, dstNonce: remote.Nonce, srcQPN: q.num, srcNonce: q.nonce}
	if err := c.send(hello, -1, d.timeout); err != nil {
		c.close()
		return fmt.Errorf("shm: send hello: %w", err)
	}
	out, table, err := q.handshake(c, deadline)
	if err != nil {
		c.close()
		return errors.Join(err, ctx.Err())
	}
	if !stop() { // ctx ended and its deadline poke may be on its way
		c.close()
		out.unmap()
		table.releaseAll(q.dev)
		return fmt.Errorf("shm: connect: %w", ctx.Err())
	}
	_ = c.c.SetDeadline(time.Time{})
	q.ctlMu.Lock()
	if !q.state.CompareAndSwap(uint32(rdma.QPInit), uint32(rdma.QPReadyToReceive)) {
		q.ctlMu.Unlock()
		c.close()
		out.unmap()
		table.releaseAll(q.dev)
		return errQPClosed
	}
	q.out.Store(out)
	q.remote.Store(table)
	if !q.state.CompareAndSwap(uint32(rdma.QPReadyToReceive), uint32(rdma.QPReadyToSend)) {
		// Closed meanwhile: Close unmaps out and table once we let go.
		q.ctlMu.Unlock()
		c.close()
		return errQPClosed
	}
	q.readerWG.Add(1)
	q.ctlMu.Unlock()
	go q.follow(c)
	return nil
}

// handshake reads welcome (or refuse), the region snapshot and ready.
func (q *QP) handshake(c *ctlConn, deadline time.Time) (*outQueue, *remoteTable, error) {
	peer := q.peerAddr // set by namePeer before connect
	f, fd, err := c.recv(deadline)
	if err != nil {
		return nil, nil, fmt.Errorf("shm: waiting for welcome: %w", err)
	}
	switch f.typ {
	case frameWelcome:
	case frameRefuse:
		return nil, nil, fmt.Errorf("%w: shm peer refused (reason %d: %s)", rdma.ErrPeerRefused, f.reason, refuseText(f.reason))
	default:
		closeFD(fd)
		return nil, nil, fmt.Errorf("%w: %s frame before welcome", ErrProtocol, f.typ)
	}
	out, err := mapQueue(f, fd)
	if err != nil {
		return nil, nil, err
	}
	regions := make(map[uint32]*remoteRegion)
	fail := func(err error) (*outQueue, *remoteTable, error) {
		out.unmap()
		(&remoteTable{m: regions}).releaseAll(q.dev)
		return nil, nil, err
	}
	for {
		f, fd, err := c.recv(deadline)
		if err != nil {
			return fail(fmt.Errorf("shm: waiting for regions: %w", err))
		}
		switch f.typ {
		case frameReady:
			return out, &remoteTable{m: regions}, nil
		case frameRegionAdd:
			if _, dup := regions[f.rkey]; dup || len(regions) >= maxRemoteRegions {
				closeFD(fd)
				return fail(fmt.Errorf("%w: duplicate rkey or too many regions", ErrProtocol))
			}
			fds, lens, err := c.recvRegion(f, fd, deadline)
			if err != nil {
				return fail(err)
			}
			r, err := q.dev.mapRegion(peer, f, fds, lens)
			if err != nil {
				return fail(err)
			}
			regions[f.rkey] = r
		default:
			closeFD(fd)
			return fail(fmt.Errorf("%w: %s frame in the region snapshot", ErrProtocol, f.typ))
		}
	}
}

func refuseText(r uint8) string {
	switch r {
	case refuseUnknownQP:
		return "no such queue pair"
	case refuseState:
		return "queue pair closed, in error, or connected to another peer"
	}
	return "unknown"
}

// follow applies the peer's later registrations until the connection ends.
func (q *QP) follow(c *ctlConn) {
	defer q.readerWG.Done()
	peer := q.peerAddr
	for {
		f, fd, err := c.recv(time.Time{})
		if err != nil {
			q.peerGone(c, err.Error())
			return
		}
		switch f.typ {
		case frameRegionAdd:
			var r *remoteRegion
			fds, lens, err := c.recvRegion(f, fd, time.Time{})
			if err == nil {
				r, err = q.dev.mapRegion(peer, f, fds, lens)
			}
			if err == nil {
				err = q.addRemote(f.rkey, r)
			}
			if err != nil {
				c.close()
				q.peerGone(c, err.Error())
				return
			}
		case frameRegionDel:
			q.delRemote(f.rkey)
		default:
			closeFD(fd)
			c.close()
			q.peerGone(c, fmt.Sprintf("unexpected %s frame", f.typ))
			return
		}
		if err := c.send(frame{typ: frameAck, acked: f.typ, rkey: f.rkey}, -1, q.dev.timeout); err != nil {
			c.close()
			q.peerGone(c, "ack failed: "+err.Error())
			return
		}
	}
}

// bindAccepted attaches the peer's connection to this QP if the QP takes
// one (under dev.mu).
// A QP is reliable-connected to one peer QP: once Connect named it, only
// it may connect to us, and once a peer connected to us, Connect may only
// name that peer.
func (q *QP) bindAccepted(c *ctlConn, h frame) bool {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	switch q.State() {
	case rdma.QPError, rdma.QPClosed:
		return false
	}
	if q.accepted != nil || (q.havePeer && (h.srcQPN != q.peerQPN || h.srcNonce != q.peerNonce)) {
		return false
	}
	q.accepted = c
	q.accQPN, q.accNonce = h.srcQPN, h.srcNonce
	return true
}

// namePeer records the peer Connect was given, or refuses it if another
// peer already connected to us.
func (q *QP) namePeer(remote rdma.Endpoint) error {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	if q.accepted != nil && (q.accQPN != remote.QPN || q.accNonce != remote.Nonce) {
		return fmt.Errorf("%w: shm QP %d is already reached by QP %d, not %s", rdma.ErrPeerRefused, q.num, q.accQPN, remote)
	}
	q.peerQPN, q.peerNonce, q.havePeer = remote.QPN, remote.Nonce, true
	q.peerAddr = remote.Addr
	return nil
}

// peerGone handles the end of one of this QP's connections: the peer closed
// its QP, died, or broke the protocol. The QP moves to ERR.
func (q *QP) peerGone(c *ctlConn, why string) {
	q.ctlMu.Lock()
	mine := c == q.dial || c == q.accepted
	q.ctlMu.Unlock()
	if !mine || q.State() == rdma.QPClosed {
		return
	}
	if q.toError() {
		q.dev.log.Info().Uint32("qpn", q.num).Str("why", why).Msg("shm: QP moved to ERR")
	}
}

// toError moves the QP to ERR (unless closed), closes its connections and
// unmaps the peer's memory once no post is running. It reports whether it
// made the move.
func (q *QP) toError() bool {
	for {
		s := q.state.Load()
		if s == uint32(rdma.QPClosed) || s == uint32(rdma.QPError) {
			return false
		}
		if q.state.CompareAndSwap(s, uint32(rdma.QPError)) {
			liveChanged()
			break
		}
	}
	q.ctlMu.Lock()
	if q.dial != nil {
		q.dial.close()
	}
	if q.accepted != nil {
		q.accepted.close()
	}
	q.ctlMu.Unlock()
	q.releaseRemote()
	return true
}

// releaseRemote unpublishes and unmaps the peer's regions and queue. The
// caller has already moved the state away from RTS.
func (q *QP) releaseRemote() {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	t := q.remote.Swap(emptyRemote)
	o := q.out.Swap(nil)
	q.waitIdle()
	t.releaseAll(q.dev)
	o.unmap()
}

// waitIdle returns once no PostSend that started before the call is still
// running. The caller has unpublished what it will free (state or table
// store, sequentially consistent), so a PostSend that enters later cannot
// see it: gen is even (none inside) or it only has to change once.
func (q *QP) waitIdle() { waitGen(&q.gen) }

// retire frees the send-queue entries up to the completion just polled.
// Poller only.
func (q *QP) retire() {
	idx := q.compRing[q.compHead&q.compMask]
	q.compHead++
	// Loaded by the poster's room check; a release store (no fence) is
	// enough for a counter that only grows and only frees room.
	release.Store64(word64(&q.sqRetired), idx+1)
}

// word64 is the 64-bit word of an atomic.Uint64 (see genWord).
func word64(a *atomic.Uint64) *uint64 { return (*uint64)(unsafe.Pointer(a)) }

// Close moves the QP to CLOSED: later posts fail with rdma.ErrClosed, the
// peer's QP sees its connections end and moves to ERR, posted receives
// complete with StatusFlushed, and all shared memory is unmapped once no
// post or poll can touch it. Idempotent; safe while others post or poll.
func (q *QP) Close() error {
	q.closeOnce.Do(func() {
		d := q.dev
		q.state.Store(uint32(rdma.QPClosed))
		liveChanged()
		q.ctlMu.Lock()
		if q.dial != nil {
			q.dial.close()
		}
		if q.accepted != nil {
			q.accepted.close()
		}
		q.ctlMu.Unlock()
		q.readerWG.Wait()
		q.releaseRemote()

		d.mu.Lock()
		old := *d.qps.Load()
		qps := make([]*QP, len(old))
		copy(qps, old)
		qps[q.num] = nil
		d.qps.Store(&qps)
		q.recvCQ.removeRecvQP(q)
		d.mu.Unlock()

		q.recvCQ.waitIdle()
		q.flushRecvs()
		q.closeErr = q.in.m.Close()
	})
	return q.closeErr
}
