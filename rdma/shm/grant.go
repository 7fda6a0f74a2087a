package shm

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// Grant confines q's peer to the regions granted to q (see
// rdma.QueuePair.Grant): a confined QP's peer is sent only those regions,
// with the granted rights, and maps a region granted without remote write
// or atomics read-only from a read-only fd, so it cannot write it even if
// it tries. The first Grant of a QP a peer already reached withdraws every
// region the peer mapped before. Grant before Connect: a grant pushed while
// the peer is still connecting may be lost with the connect.
func (q *QP) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	r, ok := mr.(*Region)
	if !ok || r.dev != q.dev {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %T is not of this shm device", rdma.ErrGrant, mr)
	}
	if err := rdma.CheckGrant(r.access, access); err != nil {
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
		q.grants = map[*Region]rdma.Access{}
	}
	old := q.grants[r]
	if !first && old.Has(access) {
		return r.Remote(), nil
	}
	to := func(e *QP) bool { return e == q }
	if first { // withdraw the unconfined snapshot
		for o := range d.regions {
			if o.access&rdma.AccessRemote != 0 {
				d.pushToLocked(frame{typ: frameRegionDel, rkey: o.key}, -1, to)
			}
		}
	} else if old != 0 { // widened: the peer maps it again with the new rights
		d.pushToLocked(frame{typ: frameRegionDel, rkey: r.key}, -1, to)
	}
	q.grants[r] = old | access
	if err := d.pushGrantLocked(r, old|access, to); err != nil {
		return rdma.RemoteRegion{}, err
	}
	return r.Remote(), nil
}

// exportAccess is what q's peer may do on r: r's remote rights for an
// unconfined QP, the granted ones for a confined QP. Caller holds d.mu.
func (q *QP) exportAccess(r *Region) rdma.Access {
	if q.grants == nil {
		return r.access & rdma.AccessRemote
	}
	return q.grants[r]
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

// sendRegion sends r to one peer connection with the rights access.
func (r *Region) sendRegion(c *ctlConn, access rdma.Access) error {
	fd, own, err := r.grantFD(access)
	if err != nil {
		return err
	}
	if own {
		defer unix.Close(fd)
	}
	f := r.addFrame()
	f.access = access
	return c.send(f, fd, r.dev.timeout)
}

// pushGrantLocked pushes r with rights access to the peers of the QPs to
// selects, and waits for their acks. Caller holds d.mu.
func (d *Device) pushGrantLocked(r *Region, access rdma.Access, to func(*QP) bool) error {
	fd, own, err := r.grantFD(access)
	if err != nil {
		return err
	}
	if own {
		defer unix.Close(fd)
	}
	f := r.addFrame()
	f.access = access
	d.pushToLocked(f, fd, to)
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
