package shm_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

func pollOne(t *testing.T, cq rdma.CompletionQueue) rdma.Completion {
	t.Helper()
	buf := make([]rdma.Completion, 1)
	deadline := time.Now().Add(5 * time.Second)
	var idle rdma.Yield
	for time.Now().Before(deadline) {
		n := cq.Poll(buf)
		if n == 1 {
			return buf[0]
		}
		idle.Idle(n)
	}
	t.Fatal("no completion within 5s")
	return rdma.Completion{}
}

func TestShm_Loopback_WriteCASFAA(t *testing.T) {
	d, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer d.Close()
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	mk := func() rdma.QueuePair {
		qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 4})
		require.NoError(t, err)
		return qp
	}
	a, b := mk(), mk()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, a.Connect(ctx, b.LocalEndpoint()))
	require.NoError(t, b.Connect(ctx, a.LocalEndpoint()))
	assert.Equal(t, rdma.QPReadyToSend, a.State())

	target, err := d.RegisterMemory(4096, rdma.AccessRemote|rdma.AccessLocalWrite)
	require.NoError(t, err)
	local, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	copy(local.Bytes(), "hello")
	rr := target.Remote()
	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 5), Remote: rdma.RemoteAddr{Addr: rr.Addr + 64, RKey: rr.RKey}}
	require.NoError(t, a.PostSend(&wr))
	c := pollOne(t, cq)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, "hello", string(target.Bytes()[64:69]))

	cas := rdma.WorkRequest{ID: 2, Op: rdma.OpCompareAndSwap, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 8, 8), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}, Compare: 0, Swap: 7}
	require.NoError(t, a.PostSend(&cas))
	c = pollOne(t, cq)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64(7), binary.LittleEndian.Uint64(target.Bytes()))
	faa := rdma.WorkRequest{ID: 3, Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 8, 8), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}, Add: 5}
	require.NoError(t, a.PostSend(&faa))
	c = pollOne(t, cq)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64(7), binary.LittleEndian.Uint64(local.Bytes()[8:]))
	assert.Equal(t, uint64(12), binary.LittleEndian.Uint64(target.Bytes()))


	require.NoError(t, b.PostRecv(&rdma.RecvRequest{ID: 9, Local: rdma.LocalSGE(local, 100, 100)}))
	send := rdma.WorkRequest{ID: 5, Op: rdma.OpSend, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("ping"), Imm: 3}
	require.NoError(t, a.PostSend(&send))
	got := map[uint64]rdma.Completion{}
	for len(got) < 2 {
		c := pollOne(t, cq)
		got[c.ID] = c
	}
	assert.Equal(t, rdma.StatusSuccess, got[5].Status)
	assert.Equal(t, rdma.OpRecv, got[9].Op)
	assert.Equal(t, uint32(4), got[9].Bytes)
	assert.Equal(t, "ping", string(local.Bytes()[100:104]))

	bad := rdma.WorkRequest{ID: 4, Op: rdma.OpWrite, Local: rdma.LocalSGE(local, 0, 5), Remote: rdma.RemoteAddr{Addr: rr.Addr + 4094, RKey: rr.RKey}}
	require.NoError(t, a.PostSend(&bad))
	c = pollOne(t, cq)
	assert.Equal(t, rdma.StatusRemoteAccess, c.Status)
	assert.Equal(t, rdma.QPError, a.State())
	require.NoError(t, b.Close())
	require.Eventually(t, func() bool { return a.State() == rdma.QPError }, 5*time.Second, time.Millisecond)
	require.NoError(t, a.PostSend(&wr))
	c = pollOne(t, cq)
	assert.Equal(t, rdma.StatusFlushed, c.Status)
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.PostSend(&wr), rdma.ErrClosed)
}
