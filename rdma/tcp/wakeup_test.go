package tcp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// With ReadSpins off every read that finds nothing waits for the epoll
// goroutine's token, so a lost wake-up would stall this ping-pong: each
// round trip must complete (wait fails after 10s).
func TestQP_PingPong_NoLostWakeups(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	cfg := tcp.Config{ReadSpins: -1}
	a, b := pair(t, cfg)
	wr := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Add: 1, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
	back := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled | rdma.FlagInline, Inline: []byte{1, 2, 3}, Remote: remote(a.MR, 64)}
	for i := 0; i < n; i++ {
		wr.ID = uint64(i)
		require.NoError(t, a.QP.PostSend(&wr))
		require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status, "round trip %d", i)
		require.NoError(t, b.QP.PostSend(&back))
		require.Equal(t, rdma.StatusSuccess, wait(t, b.CQ).Status, "round trip %d back", i)
	}
}
