package shm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

var _ rdma.DirectMapper = (*QP)(nil)

// Direct implements rdma.DirectMapper: it returns the peer's mapped bytes
// of remote after the checks remoteAt makes for every request (the rkey is
// in the table the peer sent this QP, so a confined QP reaches only its
// grants; the range is inside the region; the region gives need), and
// takes a reference on the mapping so that neither the peer's regionDel,
// nor ERR, nor Close of the QP or the device unmaps it before the
// DirectMap's Close. Control path: it locks.
func (q *QP) Direct(remote rdma.RemoteRegion, need rdma.Access) (rdma.DirectMap, error) {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	if s := q.State(); s != rdma.QPReadyToSend {
		return nil, fmt.Errorf("%w: shm QP %d is %s, Direct needs RTS", rdma.ErrQPState, q.num, s)
	}
	t := q.remote.Load()
	r := t.m[remote.RKey]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: rkey %#x is not a region the peer gave shm QP %d", rdma.ErrDirect, remote.RKey, q.num)
	case need&^rdma.AccessRemote != 0 || need == 0:
		return nil, fmt.Errorf("%w: rights %v, want remote read, write or atomic ones", rdma.ErrDirect, need)
	case !r.access.Has(need):
		return nil, fmt.Errorf("%w: region %#x gives %v, not %v", rdma.ErrDirect, remote.RKey, r.access, need)
	case remote.Len == 0 || remote.Addr < r.addr || remote.Len > r.length || remote.Addr-r.addr > r.length-remote.Len:
		return nil, fmt.Errorf("%w: range %#x+%d outside region %#x (%#x+%d)", rdma.ErrDirect, remote.Addr, remote.Len, remote.RKey, r.addr, r.length)
	case need.Has(rdma.AccessRemoteAtomic) && remote.Addr&7 != 0:
		return nil, fmt.Errorf("%w: atomic range at %#x is not 8-byte aligned", rdma.ErrDirect, remote.Addr)
	}
	q.dev.mapsMu.Lock()
	r.refs++
	q.dev.mapsMu.Unlock()
	off := remote.Addr - r.addr
	return &directMap{q: q, r: r, rkey: remote.RKey, tab: t, mem: r.mem[off : off+remote.Len : off+remote.Len]}, nil
}

// liveGen moves after every change that can turn a directMap's Live
// false, on any QP of the process: a QP leaving RTS (toError, an error
// completion, Close) and a peer withdrawing a region (delRemote), each
// after its state or table store. LiveCounter hands it out, so a hot path
// calls Live only after it moved. Its own line pair: loaded per tick,
// stored only on those control events.
var liveGen struct {
	_ [128]byte
	n atomic.Uint64
	_ [120]byte
}

// liveChanged is called after each change liveGen names.
func liveChanged() { liveGen.n.Add(1) }

// LiveCounter returns the counter that moves before Live can turn false
// (after the change it reports: ring's liveness).
func (m *directMap) LiveCounter() *atomic.Uint64 { return &liveGen.n }

// directMap is one Direct mapping: a reference on r.
type directMap struct {
	q    *QP
	r    *remoteRegion
	rkey uint32
	tab  *remoteTable // the table Live last found r in (the caller's goroutine only)
	mem  []byte
	once sync.Once
}

func (m *directMap) Bytes() []byte { return m.mem }

// Live: the QP is in RTS and its table still maps the rkey to this very
// mapping (a table changes when the peer adds or withdraws a region; only
// then is the map looked at).
func (m *directMap) Live() bool {
	if rdma.QPState(m.q.state.Load()) != rdma.QPReadyToSend {
		return false
	}
	t := m.q.remote.Load()
	if t == m.tab {
		return true
	}
	if t.m[m.rkey] != m.r {
		return false
	}
	m.tab = t
	return true
}

func (m *directMap) Close() error {
	m.once.Do(func() { m.q.dev.releaseRegion(m.r) })
	return nil
}
