package tcp

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// grantTable is a confined QP's grants: rkey → the rights its peer has on
// that region. Replaced whole on every Grant; the responder reads it with one
// atomic load.
type grantTable map[uint32]rdma.Access

// Grant confines q's peer to the regions granted to q (see
// rdma.QueuePair.Grant): the responder of q's incoming connection checks
// every remote op against q's grant table before the device's key table.
func (q *QP) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	r, ok := mr.(*region)
	if !ok || r.dev != q.dev {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %T is not of this tcp device", rdma.ErrGrant, mr)
	}
	if err := rdma.CheckGrant(r.access, access); err != nil {
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
	next := grantTable{}
	if old := q.grants.Load(); old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[r.rkey] |= access
	q.grants.Store(&next) // pairs with the responder's Load in remoteSpan
	return r.Remote(), nil
}

// allowed reports whether q's peer may use rights need on rkey: always
// for an unconfined QP (no grant yet), else as granted.
func (q *QP) allowed(rkey uint32, need rdma.Access) bool {
	g := q.grants.Load() // pairs with Grant's Store
	if g == nil {
		return true
	}
	return (*g)[rkey].Has(need) && need != 0
}

// refuse answers a request that failed the remote access checks with a NAK
// and ends the connection: serve moves the QP to ERR (logged once, by
// fail) and counts it.
func (s *responder) refuse(r *request, st rdma.Status) error {
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
