package tcp_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

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
		cfg.HostID = "test"
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

// pair returns two connected sides on two devices.
func pair(t testing.TB, cfg tcp.Config) (*side, *side) {
	t.Helper()
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(t, openDevice(t, cfg), 64, all)
	b := newSide(t, openDevice(t, cfg), 64, all)
	connect(t, a, b)
	return a, b
}

// wait polls cq until it yields one completion or the deadline passes.
func wait(t testing.TB, cq rdma.CompletionQueue) rdma.Completion {
	t.Helper()
	var buf [1]rdma.Completion
	var idle rdma.Yield
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := cq.Poll(buf[:])
		if n == 1 {
			return buf[0]
		}
		idle.Idle(n)
	}
	t.Fatalf("no completion within 10s")
	return rdma.Completion{}
}

// waitFor polls until cond holds or 10s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// none asserts cq holds nothing right now.
func none(t testing.TB, cq rdma.CompletionQueue) {
	t.Helper()
	var buf [4]rdma.Completion
	n := cq.Poll(buf[:])
	require.Zero(t, n, "unexpected completions %v", buf[:n])
}

func word64(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(&b[0])) }
