package tcp

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// grantTable is a confined QP's grants: rkey → the bytes of that region
// its peer may reach and the rights it has there. Replaced whole on every
// Grant; the responder reads it with one atomic load.
type grantTable map[uint32]grantSpan

// grantSpan is one grant: the virtual addresses [lo, hi) of the owner's
// region, with access.
type grantSpan struct {
	lo, hi uint64
	access rdma.Access
}

// Grant confines q's peer to the regions granted to q (see
// rdma.QueuePair.Grant): the responder of q's incoming connection checks
// every remote op against q's grant table before the device's key table.
func (q *QP) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	return q.GrantRange(mr, 0, len(mr.Bytes()), access)
}

// GrantRange is Grant of n bytes at off of mr: the responder refuses every
// op of q's peer that reaches outside them.
func (q *QP) GrantRange(mr rdma.MemoryRegion, off, n int, access rdma.Access) (rdma.RemoteRegion, error) {
	r, ok := mr.(*region)
	if !ok || r.dev != q.dev {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %T is not of this tcp device", rdma.ErrGrant, mr)
	}
	if err := rdma.CheckGrant(r.access, access); err != nil {
		return rdma.RemoteRegion{}, err
	}
	if err := rdma.CheckGrantRange(len(r.Bytes()), off, n); err != nil {
		return rdma.RemoteRegion{}, err
	}
	if r.dead.Load() || q.dev.keys.Load().byR[r.rkey] != r {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %#x is closed", rdma.ErrGrant, r.rkey)
	}
	q.grantMu.Lock()
	defer q.grantMu.Unlock()
	if rdma.QPState(q.state.Load()) == rdma.QPClosed {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: tcp QP %d", rdma.ErrClosed, q.num)
	}
	g := grantSpan{lo: r.Addr() + uint64(off), hi: r.Addr() + uint64(off) + uint64(n), access: access}
	next := grantTable{}
	if old := q.grants.Load(); old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	if o, had := next[r.rkey]; had {
		if o.lo != g.lo || o.hi != g.hi {
			return rdma.RemoteRegion{}, fmt.Errorf("%w: QP %d holds bytes %d..%d of region %#x, not %d..%d",
				rdma.ErrGrant, q.num, o.lo-r.Addr(), o.hi-r.Addr(), r.rkey, off, off+n)
		}
		g.access |= o.access
	}
	next[r.rkey] = g
	q.grants.Store(&next) // pairs with the responder's Load in remoteSpan
	return rdma.RemoteRegion{Addr: g.lo, RKey: r.rkey, Len: uint64(n)}, nil
}

// allowed reports whether q's peer may use rights need on the n bytes at
// addr of rkey's region: always for an unconfined QP (no grant yet), else
// as granted. (The region's own bounds are checked apart.)
func (q *QP) allowed(rkey uint32, need rdma.Access, addr, n uint64) bool {
	t := q.grants.Load() // pairs with Grant's Store
	if t == nil {
		return true
	}
	g, ok := (*t)[rkey]
	return ok && need != 0 && g.access.Has(need) && addr >= g.lo && n <= g.hi-g.lo && addr-g.lo <= g.hi-g.lo-n
}

// refuse answers a request that failed the remote access checks with a NAK
// and ends the connection: serve moves the QP to ERR (logged once, by
// fail). A remote access error is counted here, before the NAK leaves:
// once the peer has it, its QP and then this one (through the connection
// the peer closes) can reach ERR before serve runs again, and whoever saw
// both in ERR must find it counted.
func (s *responder) refuse(r *request, st rdma.Status) error {
	if st == rdma.StatusRemoteAccess {
		s.q.dev.accessErrors.Add(1)
	}
	if err := s.nak(r.seq, st); err != nil {
		return err
	}
	if st != rdma.StatusRemoteAccess {
		return nil
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s of %d bytes at %#x, rkey %#x", ErrRemoteAccess, r.op, r.len, r.raddr, r.rkey)
}

// RemoteAccessErrors counts the connections this device closed because
// their peer named memory it may not reach.
func (d *Device) RemoteAccessErrors() uint64 { return d.accessErrors.Load() }

// endRefused closes a connection whose peer named memory it may not reach,
// once the peer has read our NAK: a peer that follows the protocol moves its
// own QP to ERR on it and hangs up; one that does not is cut off after
// ConnectTimeout. Nothing it sends meanwhile is applied or answered. Then
// the QP moves to ERR.
func (q *QP) endRefused(c *rawConn, br *bufio.Reader, cause error) {
	t := time.AfterFunc(q.dev.cfg.ConnectTimeout, c.shutdown)
	_, _ = io.Copy(io.Discard, br)
	t.Stop()
	q.fail(rdma.StatusFlushed, fmt.Errorf("%w, from %s: connection closed", cause, c.remoteAddr()))
}
