package rdmawin_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/rdmawin"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// Over the wrapper a grant's rkey works on a queue pair connected to the
// granted one only; the region's own rkey and another pair's grant fail,
// the memory untouched.
func TestWrap_GrantKeysWorkOnTheirOwnPairOnly(t *testing.T) {
	open := func() rdma.Device {
		d, err := tcp.Open(tcp.Config{HostID: "win"})
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		return rdmawin.Wrap(d)
	}
	devA, devB := open(), open()
	require.True(t, devB.Caps().GrantOnly)
	target, err := devB.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	local, err := devA.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	copy(local.Bytes(), "granted!")
	type pair struct {
		a  rdma.QueuePair
		cq rdma.CompletionQueue
		rr rdma.RemoteRegion
	}
	connect := func() pair {
		cqA, err := devA.CreateCQ(16)
		require.NoError(t, err)
		cqB, err := devB.CreateCQ(16)
		require.NoError(t, err)
		a, err := devA.CreateQP(rdma.QPConfig{SendCQ: cqA, RecvCQ: cqA, SendDepth: 8, RecvDepth: 1})
		require.NoError(t, err)
		b, err := devB.CreateQP(rdma.QPConfig{SendCQ: cqB, RecvCQ: cqB, SendDepth: 8, RecvDepth: 1, Confined: true})
		require.NoError(t, err)
		rr, err := b.Grant(target, rdma.AccessRemoteWrite)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- b.Connect(ctx, a.LocalEndpoint()) }()
		require.NoError(t, a.Connect(ctx, b.LocalEndpoint()))
		require.NoError(t, <-errc)
		return pair{a: a, cq: cqA, rr: rr}
	}
	write := func(p pair, rkey uint32) rdma.Status {
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 8),
			Remote: rdma.RemoteAddr{Addr: target.Addr(), RKey: rkey}}
		require.NoError(t, p.a.PostSend(&wr))
		buf := make([]rdma.Completion, 1)
		for end := time.Now().Add(10 * time.Second); p.cq.Poll(buf) == 0; runtime.Gosched() {
			require.True(t, time.Now().Before(end), "no completion")
		}
		return buf[0].Status
	}
	clear(target.Bytes())
	p1, p2, p3 := connect(), connect(), connect()
	require.NotEqual(t, target.RKey(), p1.rr.RKey)
	require.NotEqual(t, p1.rr.RKey, p2.rr.RKey)
	require.Equal(t, rdma.StatusRemoteAccess, write(p2, p1.rr.RKey), "another pair's grant")
	require.Equal(t, rdma.StatusRemoteAccess, write(p3, target.RKey()), "the region's own rkey")
	require.Equal(t, make([]byte, 4096), target.Bytes())
	require.Equal(t, rdma.StatusSuccess, write(p1, p1.rr.RKey), "its own grant")
	require.Equal(t, []byte("granted!"), target.Bytes()[:8])
}
