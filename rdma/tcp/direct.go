package tcp

import (
	"fmt"
	"sync"

	"github.com/tickbus/tickbus/rdma"
)

var _ rdma.DirectMapper = (*QP)(nil)

// Direct implements rdma.DirectMapper, on a device with
// Config.DirectLoopback, for one pair only: a loopback pair on
// this very device whose peer QP is unconfined (no Grant). Its requests would
// go from this process through the loopback socket back to this process's
// responder, which would apply them with CPU atomics and copies on the same
// memory; Direct hands the caller that memory instead, after the checks the
// responder makes (the rkey is this device's, the range is inside its region,
// the region gives need, an atomic range is 8-byte aligned). So a publisher
// that is its topic's home claims with a CPU atomic on its own counter, as on
// shm, whichever provider the topic uses.
//
// Every other QP (a peer on another device or process, or a confined peer,
// whose grants and wire are the point) gets ErrDirect and keeps the wire.
// Control path: it locks.
func (q *QP) Direct(remote rdma.RemoteRegion, need rdma.Access) (rdma.DirectMap, error) {
	q.mu.Lock()
	st, rem, have := rdma.QPState(q.state.Load()), q.remote, q.haveRemote
	q.mu.Unlock()
	if st != rdma.QPReadyToSend || !have {
		return nil, fmt.Errorf("%w: tcp QP %d is %s, Direct needs RTS", rdma.ErrQPState, q.num, st)
	}
	if !q.dev.cfg.DirectLoopback {
		return nil, fmt.Errorf("%w: tcp device without DirectLoopback: every op goes on the wire", rdma.ErrDirect)
	}
	if need&^rdma.AccessRemote != 0 || need == 0 {
		return nil, fmt.Errorf("%w: rights %v, want remote read, write or atomic ones", rdma.ErrDirect, need)
	}
	if rem.Addr != q.dev.addr || rem.HostID != q.dev.cfg.HostID {
		return nil, fmt.Errorf("%w: tcp QP %d's peer %s is not on this device", rdma.ErrDirect, q.num, rem)
	}
	peer := (*q.dev.qpTable.Load())[rem.QPN]
	if peer == nil || peer.nonce != rem.Nonce {
		return nil, fmt.Errorf("%w: tcp QP %d's peer %s is gone", rdma.ErrDirect, q.num, rem)
	}
	peer.mu.Lock()
	back := peer.in != nil && peer.inQPN == q.num && peer.inNonce == q.nonce
	peer.mu.Unlock()
	switch {
	case !back:
		return nil, fmt.Errorf("%w: tcp QP %d's peer %s does not serve this QP", rdma.ErrDirect, q.num, rem)
	case peer.grants.Load() != nil:
		return nil, fmt.Errorf("%w: tcp QP %d's peer %s is confined: its grants are served on the wire", rdma.ErrDirect, q.num, rem)
	}
	keys := q.dev.keys.Load()
	r := keys.byR[remote.RKey]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: rkey %#x is not a region of this tcp device", rdma.ErrDirect, remote.RKey)
	case r.owned == nil:
		// Register'ed memory belongs to another device, which may unmap it
		// whatever this mapping says: keep such regions on the wire.
		return nil, fmt.Errorf("%w: region %#x is memory another device registered", rdma.ErrDirect, remote.RKey)
	case !r.access.Has(need):
		return nil, fmt.Errorf("%w: region %#x gives %v, not %v", rdma.ErrDirect, remote.RKey, r.access, need)
	case need.Has(rdma.AccessRemoteAtomic) && remote.Addr&7 != 0:
		return nil, fmt.Errorf("%w: atomic range at %#x is not 8-byte aligned", rdma.ErrDirect, remote.Addr)
	}
	mem, ok := r.span(remote.Addr, remote.Len)
	if !ok || remote.Len == 0 {
		return nil, fmt.Errorf("%w: range %#x+%d outside region %#x (%#x+%d)", rdma.ErrDirect, remote.Addr, remote.Len, remote.RKey, r.addr, len(r.b))
	}
	if !r.mapRef() {
		return nil, fmt.Errorf("%w: region %#x is closed", rdma.ErrDirect, remote.RKey)
	}
	return &directMap{q: q, peer: peer, r: r, rkey: remote.RKey, keys: keys, mem: mem}, nil
}

// directMap is one Direct mapping: a mapping reference on r, so that r's
// memory stays mapped until Close whatever r, the QPs or the device do.
type directMap struct {
	q, peer *QP
	r       *region
	rkey    uint32
	keys    *keyTable // the key table Live last found r in (the caller's goroutine only)
	mem     []byte
	once    sync.Once
	err     error
}

func (m *directMap) Bytes() []byte { return m.mem }

// Live: both QPs are in RTS (a peer in ERR or CLOSED would no longer answer
// the wire either), the peer is still unconfined, and the device's key table
// still maps the rkey to this region (a table changes only when a region is
// registered or closed; only then is the map looked at).
func (m *directMap) Live() bool {
	if rdma.QPState(m.q.state.Load()) != rdma.QPReadyToSend || rdma.QPState(m.peer.state.Load()) != rdma.QPReadyToSend {
		return false
	}
	if m.peer.grants.Load() != nil { // pairs with Grant's Store
		return false
	}
	t := m.q.dev.keys.Load()
	if t == m.keys {
		return true
	}
	if t.byR[m.rkey] != m.r {
		return false
	}
	m.keys = t
	return true
}

func (m *directMap) Close() error {
	m.once.Do(func() { m.err = m.r.mapUnref() })
	return m.err
}
