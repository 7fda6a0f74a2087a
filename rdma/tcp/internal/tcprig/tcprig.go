// Package tcprig is the test rig the tcp provider's tests and its benchmarks
// against NATS share: devices, connected queue-pair ends and polling helpers.
// It lives apart from the tests so that tcpbench (which links nats-server)
// and the provider's own tests (which must not) use one copy.
package tcprig

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// Side is one end of a connected pair: its device, CQ, QP and a region.
type Side struct {
	Dev *tcp.Device
	CQ  rdma.CompletionQueue
	QP  rdma.QueuePair
	MR  rdma.MemoryRegion
}

// OpenDevice opens a tcp device (host id "test" by default) closed at the
// end of the test.
func OpenDevice(t testing.TB, cfg tcp.Config) *tcp.Device {
	t.Helper()
	if cfg.HostID == "" {
		cfg.HostID = "test"
	}
	d, err := tcp.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

// NewSide makes a CQ, a QP of depth and a 64 KiB region with access on d.
func NewSide(t testing.TB, d *tcp.Device, depth int, access rdma.Access) *Side {
	t.Helper()
	cq, err := d.CreateCQ(4 * depth)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: depth, RecvDepth: depth})
	require.NoError(t, err)
	mr, err := d.RegisterMemory(1<<16, access)
	require.NoError(t, err)
	return &Side{Dev: d, CQ: cq, QP: qp, MR: mr}
}

// Connect connects a's and b's QPs to each other.
func Connect(t testing.TB, a, b *Side) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.QP.Connect(ctx, b.QP.LocalEndpoint()))
	require.NoError(t, b.QP.Connect(ctx, a.QP.LocalEndpoint()))
}

// Remote names byte off of mr for a remote op.
func Remote(mr rdma.MemoryRegion, off int) rdma.RemoteAddr {
	return rdma.RemoteAddr{Addr: mr.Addr() + uint64(off), RKey: mr.RKey()}
}

// Word64 views the first 8 bytes of b as a word for atomic access.
func Word64(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }
