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
// only (its geometry and the memfds behind it), maps the pages that cover
// it, and its QP refuses every op outside the range (remoteAt). Of memory
// allocated in grant units (rdma.MemoryConfig) the peer is sent only the
// memfds of the units the range covers, so even a hostile peer can map
// nothing else of the region; of a region backed by one memfd it holds
// that memfd, and a hostile peer could map the rest of it (SECURITY.md).
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
				d.pushToLocked(delMsg(o.key), to)
			}
		}
	} else if had { // widened: the peer maps it again with the new rights
		d.pushToLocked(delMsg(r.key), to)
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

// grantMsg is the region message of g: the regionAdd of the granted bytes
// of r, with the memfd behind their first byte, then a regionUnit for each
// further memfd they cover, and only those (so a peer granted a part of a
// region in grant units holds no memfd of the rest). The fds are r's own,
// or, when g gives no remote write or atomics but r's fds are writable,
// read-only ones opened for the message, which release closes.
func (r *Region) grantMsg(g grant) (msg []fdFrame, release func(), err error) {
	writable := r.access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0
	readOnly := writable && g.access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) == 0
	var opened []int
	release = func() {
		for _, fd := range opened {
			unix.Close(fd)
		}
	}
	end := g.off + g.n
	for _, p := range r.pieces {
		lo, hi := max(g.off, p.off), min(end, p.off+p.n)
		if lo >= hi {
			continue
		}
		fd := p.fd
		if readOnly {
			if fd, err = dupFD(p.fd, false); err != nil {
				release()
				return nil, nil, fmt.Errorf("shm: read-only fd for region %#x: %w", r.key, err)
			}
			opened = append(opened, fd)
		}
		if len(msg) == 0 {
			msg = append(msg, fdFrame{frame{typ: frameRegionAdd, rkey: r.key, access: g.access, addr: r.addr + g.off,
				length: g.n, fileOff: p.fileOff + (lo - p.off)}, fd})
		} else {
			msg = append(msg, fdFrame{frame{typ: frameRegionUnit, rkey: r.key, length: hi - lo}, fd})
		}
	}
	msg[0].f.units = uint32(len(msg))
	return msg, release, nil
}

// sendRegion sends what g grants of r to one peer connection.
func (r *Region) sendRegion(c *ctlConn, g grant) error {
	msg, release, err := r.grantMsg(g)
	if err != nil {
		return err
	}
	defer release()
	return c.sendMsg(msg, r.dev.timeout)
}

// pushGrantLocked pushes what g grants of r to the peers of the QPs to
// selects, and waits for their acks. Caller holds d.mu.
func (d *Device) pushGrantLocked(r *Region, g grant, to func(*QP) bool) error {
	msg, release, err := r.grantMsg(g)
	if err != nil {
		return err
	}
	defer release()
	d.pushToLocked(msg, to)
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
