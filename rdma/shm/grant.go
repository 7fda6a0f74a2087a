package shm

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// grant is what a confined QP's peer may reach of one region: the n bytes
// at offset off, with access.
type grant struct {
	off, n uint64
	access rdma.Access
}

// Grant confines q's peer to the regions granted to q (see
// rdma.QueuePair.Grant): a confined QP's peer is sent only those regions,
// with the granted rights, and maps a region granted without remote write
// or atomics read-only from a read-only fd, so it cannot write it even if
// it tries. The first Grant of a QP a peer already reached withdraws every
// region the peer mapped before. Grant before Connect: a grant pushed while
// the peer is still connecting may be lost with the connect.
func (q *QP) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	return q.GrantRange(mr, 0, len(mr.Bytes()), access)
}

// GrantRange is Grant of n bytes at off of mr: the peer is sent the range
// only (its memfd offset and length), maps the pages that cover it, and
// its QP refuses every op outside the range (remoteAt). The peer holds the
// region's memfd, so a hostile process of the uid could map the rest of
// it; an honest peer, or a buggy one, cannot reach it (see SECURITY.md).
func (q *QP) GrantRange(mr rdma.MemoryRegion, off, n int, access rdma.Access) (rdma.RemoteRegion, error) {
	r, ok := mr.(*Region)
	if !ok || r.dev != q.dev {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %T is not of this shm device", rdma.ErrGrant, mr)
	}
	if err := rdma.CheckGrant(r.access, access); err != nil {
		return rdma.RemoteRegion{}, err
	}
	if err := rdma.CheckGrantRange(len(r.mem), off, n); err != nil {
		return rdma.RemoteRegion{}, err
	}
	d := q.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, live := d.regions[r]; !live {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %#x is closed", rdma.ErrGrant, r.key)
	}
	if q.State() == rdma.QPClosed {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: shm QP %d", rdma.ErrClosed, q.num)
	}
	first := q.grants == nil
	if q.grants == nil {
		q.grants = map[*Region]grant{}
	}
	g := grant{off: uint64(off), n: uint64(n), access: access}
	old, had := q.grants[r]
	if had && (old.off != g.off || old.n != g.n) {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: QP %d holds bytes %d..%d of region %#x, not %d..%d",
			rdma.ErrGrant, q.num, old.off, old.off+old.n, r.key, g.off, g.off+g.n)
	}
	rr := rdma.RemoteRegion{Addr: r.addr + g.off, RKey: r.key, Len: g.n}
	if !first && had && old.access.Has(access) {
		return rr, nil
	}
	to := func(e *QP) bool { return e == q }
	if first { // withdraw the unconfined snapshot
		for o := range d.regions {
			if o.access&rdma.AccessRemote != 0 {
				d.pushToLocked(frame{typ: frameRegionDel, rkey: o.key}, -1, to)
			}
		}
	} else if had { // widened: the peer maps it again with the new rights
		d.pushToLocked(frame{typ: frameRegionDel, rkey: r.key}, -1, to)
	}
	g.access |= old.access
	q.grants[r] = g
	if err := d.pushGrantLocked(r, g, to); err != nil {
		return rdma.RemoteRegion{}, err
	}
	return rr, nil
}

// exportGrant is what q's peer may reach of r: all of r with its remote
// rights for an unconfined QP, the grant for a confined QP (access 0: none).
// Caller holds d.mu.
func (q *QP) exportGrant(r *Region) grant {
	if q.grants == nil {
		return grant{n: uint64(len(r.mem)), access: r.access & rdma.AccessRemote}
	}
	return q.grants[r]
}

// grantFrame is the regionAdd frame of g: the granted bytes of r only.
func (r *Region) grantFrame(g grant) frame {
	f := r.addFrame()
	f.addr += g.off
	f.fileOff += g.off
	f.length = g.n
	f.access = g.access
	return f
}

// grantFD returns an fd of r's memfd for a peer granted access, and
// whether the caller must close it: a read-only one when access gives no
// remote write or atomics but r's own fd is writable.
func (r *Region) grantFD(access rdma.Access) (int, bool, error) {
	writable := r.access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0
	if !writable || access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0 {
		return r.fd, false, nil
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", r.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, fmt.Errorf("shm: read-only fd for region %#x: %w", r.key, err)
	}
	return fd, true, nil
}

// sendRegion sends what g grants of r to one peer connection.
func (r *Region) sendRegion(c *ctlConn, g grant) error {
	fd, own, err := r.grantFD(g.access)
	if err != nil {
		return err
	}
	if own {
		defer unix.Close(fd)
	}
	return c.send(r.grantFrame(g), fd, r.dev.timeout)
}

// pushGrantLocked pushes what g grants of r to the peers of the QPs to
// selects, and waits for their acks. Caller holds d.mu.
func (d *Device) pushGrantLocked(r *Region, g grant, to func(*QP) bool) error {
	fd, own, err := r.grantFD(g.access)
	if err != nil {
		return err
	}
	if own {
		defer unix.Close(fd)
	}
	d.pushToLocked(r.grantFrame(g), fd, to)
	return nil
}

// hangUp follows a remote access error of this QP (it is in ERR already):
// it closes the QP's control connections, so the peer's QP goes to ERR as
// a verbs responder's would, and nobody can keep guessing rkeys through
// this pair. Logged once per QP; counted by the device.
func (q *QP) hangUp(at rdma.RemoteAddr) {
	q.dev.accessErrors.Add(1)
	q.ctlMu.Lock()
	if q.dial != nil {
		q.dial.close()
	}
	if q.accepted != nil {
		q.accepted.close()
	}
	q.ctlMu.Unlock()
	q.dev.log.Warn().Uint32("qpn", q.num).Uint32("rkey", at.RKey).Uint64("addr", at.Addr).
		Msg("shm: remote access error; QP in ERR and its connection to the peer closed")
}

// RemoteAccessErrors counts this device's QPs that named memory their
// peer did not give them (and were cut off).
func (d *Device) RemoteAccessErrors() uint64 { return d.accessErrors.Load() }
