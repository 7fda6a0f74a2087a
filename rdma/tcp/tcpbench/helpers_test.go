package tcpbench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

// side is one end of a connected pair: its device, CQ, QP and a region.
type side struct {
	dev *tcp.Device
	cq  rdma.CompletionQueue
	qp  rdma.QueuePair
	mr  rdma.MemoryRegion
}

func openDevice(t testing.TB, cfg tcp.Config) *tcp.Device {
	t.Helper()
	if cfg.HostID == "" {
		cfg.HostID = "bench"
	}
	d, err := tcp.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func newSide(t testing.TB, d *tcp.Device, depth int, access rdma.Access) *side {
	t.Helper()
	cq, err := d.CreateCQ(4 * depth)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: depth, RecvDepth: depth})
	require.NoError(t, err)
	mr, err := d.RegisterMemory(1<<16, access)
	require.NoError(t, err)
	return &side{dev: d, cq: cq, qp: qp, mr: mr}
}

func connect(t testing.TB, a, b *side) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.qp.Connect(ctx, b.qp.LocalEndpoint()))
	require.NoError(t, b.qp.Connect(ctx, a.qp.LocalEndpoint()))
}

func remote(mr rdma.MemoryRegion, off int) rdma.RemoteAddr {
	return rdma.RemoteAddr{Addr: mr.Addr() + uint64(off), RKey: mr.RKey()}
}
