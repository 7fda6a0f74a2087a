package tcp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
	"github.com/tickbus/tickbus/rdma/tcp/internal/tcprig"
)

// The rig both tcp test packages share (rdma/tcp/internal/tcprig).
type side = tcprig.Side

var (
	openDevice = tcprig.OpenDevice
	newSide    = tcprig.NewSide
	connect    = tcprig.Connect
	remote     = tcprig.Remote
	word64     = tcprig.Word64
)

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
