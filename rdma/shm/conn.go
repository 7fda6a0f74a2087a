package shm

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// ctlConn is one control connection: a SOCK_SEQPACKET unix socket whose
// frames may carry one memfd each.
type ctlConn struct {
	c    *net.UnixConn
	wmu  sync.Mutex    // one writer at a time
	acks chan frame    // acceptor side: acks read by the reader goroutine
	done chan struct{} // closed when the reader goroutine stops
	once sync.Once
}

func newCtlConn(c *net.UnixConn) *ctlConn {
	return &ctlConn{c: c, acks: make(chan frame, 1), done: make(chan struct{})}
}

func (c *ctlConn) close() { c.once.Do(func() { c.c.Close() }) }

// peerUID returns the uid of the process at the other end (SO_PEERCRED,
// taken by the kernel at connect time).
func (c *ctlConn) peerUID() (uint32, error) {
	raw, err := c.c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if gerr != nil {
		return 0, gerr
	}
	return cred.Uid, nil
}

// checkPeer refuses a peer whose uid is neither ours nor allowed.
func (d *Device) checkPeer(c *ctlConn) error {
	uid, err := c.peerUID()
	if err != nil {
		return fmt.Errorf("shm: SO_PEERCRED: %w", err)
	}
	if uid != d.uid && !slices.Contains(d.cfg.AllowUIDs, uid) {
		return fmt.Errorf("%w: uid %d", ErrPeerCredentials, uid)
	}
	return nil
}

// fdFrame is a frame and the fd it carries (-1: none).
type fdFrame struct {
	f  frame
	fd int
}

// send writes one frame, with fd attached when fd ≥ 0, within timeout.
func (c *ctlConn) send(f frame, fd int, timeout time.Duration) error {
	return c.sendMsg([]fdFrame{{f, fd}}, timeout)
}

// sendMsg writes frames back to back (no other writer between them), each
// with its fd, within timeout.
func (c *ctlConn) sendMsg(msg []fdFrame, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	for _, m := range msg {
		var buf [maxFrameSize]byte
		b := m.f.appendBinary(buf[:0])
		var oob []byte
		if m.fd >= 0 {
			oob = unix.UnixRights(m.fd)
		}
		n, oobn, err := c.c.WriteMsgUnix(b, oob, nil)
		if err == nil && (n != len(b) || oobn != len(oob)) {
			err = fmt.Errorf("shm: short control write %d/%d", n, len(b))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recvRegion reads the regionUnit frames that follow add (units-1 of them)
// and returns the region's memfds, first add's own (fd), and the bytes of
// the region each backs. On error every fd is closed.
func (c *ctlConn) recvRegion(add frame, fd int, deadline time.Time) ([]int, []uint64, error) {
	fds := []int{fd}
	lens := []uint64{0}
	var rest uint64
	for i := uint32(1); i < add.units; i++ {
		f, ufd, err := c.recv(deadline)
		if err == nil && (f.typ != frameRegionUnit || f.rkey != add.rkey) {
			closeFD(ufd)
			err = fmt.Errorf("%w: %s frame inside region %#x's units", ErrProtocol, f.typ, add.rkey)
		}
		if err == nil && f.length >= add.length-rest {
			closeFD(ufd)
			err = fmt.Errorf("%w: region %#x's units add up to more than its %d bytes", ErrProtocol, add.rkey, add.length)
		}
		if err != nil {
			for _, fd := range fds {
				closeFD(fd)
			}
			return nil, nil, err
		}
		fds = append(fds, ufd)
		lens = append(lens, f.length)
		rest += f.length
	}
	lens[0] = add.length - rest
	return fds, lens, nil
}

// recv reads one frame and the fd it carries (-1 if none). A frame that
// does not decode, is truncated, or carries fds it should not (or lacks the
// one it should) is an error wrapping ErrProtocol; every fd received with a
// bad frame is closed.
func (c *ctlConn) recv(deadline time.Time) (frame, int, error) {
	var buf [maxFrameSize + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	if err := c.c.SetReadDeadline(deadline); err != nil {
		return frame{}, -1, err
	}
	n, oobn, flags, _, err := c.c.ReadMsgUnix(buf[:], oob)
	fds := parseFDs(oob[:oobn])
	fail := func(err error) (frame, int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return frame{}, -1, err
	}
	if err != nil {
		return fail(err)
	}
	if n == 0 && oobn == 0 {
		return fail(net.ErrClosed)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > maxFrameSize {
		return fail(fmt.Errorf("%w: oversized frame", ErrProtocol))
	}
	f, err := decodeFrame(buf[:n])
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrProtocol, err))
	}
	want := 0
	if f.typ.carriesFD() {
		want = 1
	}
	if len(fds) != want {
		return fail(fmt.Errorf("%w: %s frame with %d fds, want %d", ErrProtocol, f.typ, len(fds), want))
	}
	if want == 0 {
		return f, -1, nil
	}
	return f, fds[0], nil
}

func parseFDs(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// delMsg is the regionDel of rkey.
func delMsg(rkey uint32) []fdFrame { return []fdFrame{{frame{typ: frameRegionDel, rkey: rkey}, -1}} }

// pushToLocked sends msg (a region: regionAdd and its units, or a
// regionDel) to every peer connected to one of our QPs that to selects and
// waits for each ack, so that when it returns every live peer has mapped
// or unmapped the region. A peer that does not ack within the control
// timeout loses its connection (its QP and ours go to ERR). Caller holds
// d.mu.
func (d *Device) pushToLocked(msg []fdFrame, to func(*QP) bool) {
	f := msg[0].f
	type pending struct {
		c *ctlConn
		q *QP
	}
	var sent []pending
	for c, q := range d.exports {
		if !to(q) {
			continue
		}
		if q.State() == rdma.QPClosed {
			continue // Close closed its connections: nothing to tell its peer
		}
		if err := c.sendMsg(msg, d.timeout); err != nil {
			d.log.Warn().Err(err).Uint32("qpn", q.num).Msg("shm: push region to peer failed; closing its connection")
			c.close()
			continue
		}
		sent = append(sent, pending{c, q})
	}
	deadline := time.NewTimer(d.timeout)
	defer deadline.Stop()
	for _, p := range sent {
		select {
		case a := <-p.c.acks:
			if a.acked != f.typ || a.rkey != f.rkey {
				d.log.Warn().Uint32("qpn", p.q.num).Msg("shm: peer acked the wrong region; closing its connection")
				p.c.close()
			}
		case <-p.c.done:
		case <-deadline.C:
			d.log.Warn().Uint32("qpn", p.q.num).Msg("shm: peer did not ack a region in time; closing its connection")
			p.c.close()
		}
	}
}

// acceptLoop serves peers' control connections until the listener closes.
func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		uc, err := d.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				d.log.Warn().Err(err).Msg("shm: accept failed; device stops accepting")
			}
			return
		}
		c := newCtlConn(uc)
		d.mu.Lock()
		if d.closed.Load() {
			d.mu.Unlock()
			c.close()
			return
		}
		d.conns[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.serve(c)
	}
}

// serve runs one accepted connection: credentials, hello, the snapshot of
// our regions, then acks until the peer goes away.
func (d *Device) serve(c *ctlConn) {
	defer d.wg.Done()
	var q *QP
	defer func() {
		close(c.done)
		c.close()
		d.mu.Lock()
		delete(d.conns, c)
		delete(d.exports, c)
		d.mu.Unlock()
		if q != nil {
			q.peerGone(c, "peer's connection to us closed")
		}
	}()
	if err := d.checkPeer(c); err != nil {
		d.log.Warn().Err(err).Msg("shm: refused a peer")
		return
	}
	hello, _, err := c.recv(time.Now().Add(d.timeout))
	if err != nil || hello.typ != frameHello {
		d.log.Warn().Err(err).Stringer("frame", hello.typ).Msg("shm: bad hello; connection closed")
		return
	}
	q, reason := d.bindAccepted(c, hello)
	if q == nil {
		_ = c.send(frame{typ: frameRefuse, reason: reason}, -1, d.timeout)
		return
	}
	for {
		f, fd, err := c.recv(time.Time{})
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				d.log.Debug().Err(err).Uint32("qpn", q.num).Msg("shm: peer connection ended")
			}
			return
		}
		if fd >= 0 {
			unix.Close(fd)
		}
		if f.typ != frameAck {
			d.log.Warn().Stringer("frame", f.typ).Uint32("qpn", q.num).Msg("shm: unexpected frame from peer; connection closed")
			return
		}
		select {
		case c.acks <- f:
		default:
			d.log.Warn().Uint32("qpn", q.num).Msg("shm: unsolicited ack from peer; connection closed")
			return
		}
	}
}

// bindAccepted attaches an accepted connection to the QP its hello names
// and sends welcome, the region snapshot and ready, all under d.mu so no
// registration slips between the snapshot and the push list.
func (d *Device) bindAccepted(c *ctlConn, h frame) (*QP, uint8) {
	d.mu.Lock()
	defer d.mu.Unlock()
	qps := *d.qps.Load()
	if int(h.dstQPN) >= len(qps) || qps[h.dstQPN] == nil || qps[h.dstQPN].nonce != h.dstNonce {
		return nil, refuseUnknownQP
	}
	q := qps[h.dstQPN]
	if !q.bindAccepted(c, h) {
		return nil, refuseState
	}
	in := q.in
	w := frame{typ: frameWelcome, qCap: uint32(in.view.mask + 1), qMaxSend: uint32(in.view.maxSend),
		qSlot: uint32(in.view.slot), qSize: uint64(len(in.m.Bytes()))}
	if err := c.send(w, in.m.Fd(), d.timeout); err != nil {
		c.close()
		return q, 0
	}
	for r := range d.regions {
		if g := q.exportGrant(r); g.access != 0 {
			if err := r.sendRegion(c, g); err != nil {
				c.close()
				return q, 0
			}
		}
	}
	if err := c.send(frame{typ: frameReady}, -1, d.timeout); err != nil {
		c.close()
		return q, 0
	}
	d.exports[c] = q
	return q, 0
}
