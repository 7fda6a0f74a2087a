// Package rdmawin wraps a tcp rdma device so that its rkeys behave as a
// verbs device's with type 2B memory windows do (rdma.Caps.GrantOnly):
// every Grant returns an rkey of its own, valid only on a queue pair
// connected to the granted one, and a region's own rkey (what a descriptor
// sniffed off the control plane carries) reaches nothing. shm and tcp name
// a grant by the region's own rkey and check it per queue pair, so on them
// a peer that used the announced descriptor instead of its own
// connection's would go unnoticed; over this wrapper it fails with
// rdma.StatusRemoteAccess. For tests only: the translation costs a lock
// and a map lookup per request.
package rdmawin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tickbus/tickbus/rdma"
)

// ErrExhausted: more grants than the emulation has window keys for.
var ErrExhausted = errors.New("rdmawin: out of window keys")

// noKey is an rkey tcp never issues (its keys are at least 1<<16): what a
// request naming a region's own rkey, or another queue pair's window, is
// sent with, so the target refuses it.
const noKey = 0

// maxWindow bounds the window keys: below tcp's smallest key, so a window
// key never names a real region.
const maxWindow = 1<<16 - 1

// peer names one queue pair by its endpoint.
type peer struct {
	provider, host, addr string
	qpn                  uint32
	nonce                uint64
}

func peerOf(e rdma.Endpoint) peer {
	return peer{provider: e.Provider, host: e.HostID, addr: e.Addr, qpn: e.QPN, nonce: e.Nonce}
}

// window is one grant: the real rkey, and the queue pair it was granted on.
type window struct {
	rkey  uint32
	owner peer
}

// windows is process-wide: the granting device and the requesting one are
// different wrappers (one per node), as on a fabric they are different
// hosts.
var windows struct {
	mu   sync.Mutex
	next uint32
	byK  map[uint32]window
}

func addWindow(w window) (uint32, error) {
	windows.mu.Lock()
	defer windows.mu.Unlock()
	if windows.byK == nil {
		windows.byK = map[uint32]window{}
	}
	if windows.next >= maxWindow {
		return 0, ErrExhausted
	}
	windows.next++
	windows.byK[windows.next] = w
	return windows.next, nil
}

func lookup(k uint32) (window, bool) {
	windows.mu.Lock()
	defer windows.mu.Unlock()
	w, ok := windows.byK[k]
	return w, ok
}

// Wrap returns d, a tcp device, with grant-only rkeys.
func Wrap(d rdma.Device) rdma.Device { return &device{Device: d} }

type device struct{ rdma.Device }

// Caps are d's, grant-only.
func (d *device) Caps() rdma.Caps {
	c := d.Device.Caps()
	c.GrantOnly = c.GrantPerQP
	return c
}

func (d *device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	qp, err := d.Device.CreateQP(cfg)
	if err != nil {
		return nil, err
	}
	return &queuePair{QueuePair: qp}, nil
}

type queuePair struct {
	rdma.QueuePair
	mu     sync.Mutex
	remote peer // set by Connect
	linked bool
}

func (q *queuePair) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	return q.GrantRange(mr, 0, len(mr.Bytes()), access)
}

// GrantRange grants as the wrapped queue pair does and returns a window key
// of its own for the grant.
func (q *queuePair) GrantRange(mr rdma.MemoryRegion, off, n int, access rdma.Access) (rdma.RemoteRegion, error) {
	rr, err := q.QueuePair.GrantRange(mr, off, n, access)
	if err != nil {
		return rr, err
	}
	k, err := addWindow(window{rkey: rr.RKey, owner: peerOf(q.LocalEndpoint())})
	if err != nil {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: %w", rdma.ErrGrant, err)
	}
	rr.RKey = k
	return rr, nil
}

func (q *queuePair) Connect(ctx context.Context, remote rdma.Endpoint) error {
	q.mu.Lock()
	q.remote, q.linked = peerOf(remote), true
	q.mu.Unlock()
	return q.QueuePair.Connect(ctx, remote)
}

// PostSend sends wr with the real rkey of the window it names, if that
// window was granted on the queue pair this one is connected to; any other
// rkey (a region's own, another queue pair's window) is sent as noKey.
func (q *queuePair) PostSend(wr *rdma.WorkRequest) error {
	switch wr.Op {
	case rdma.OpWrite, rdma.OpWriteImm, rdma.OpRead, rdma.OpCompareAndSwap, rdma.OpFetchAndAdd:
	default:
		return q.QueuePair.PostSend(wr)
	}
	q.mu.Lock()
	remote, linked := q.remote, q.linked
	q.mu.Unlock()
	out := *wr
	out.Remote.RKey = noKey
	if w, ok := lookup(wr.Remote.RKey); ok && linked && w.owner == remote {
		out.Remote.RKey = w.rkey
	}
	return q.QueuePair.PostSend(&out)
}
