package tcp_test

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

func TestQP_Write_LandsInPeerMemory(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	copy(a.MR.Bytes()[100:], "hello, tick")
	wr := rdma.WorkRequest{ID: 7, Op: rdma.OpWrite, Flags: rdma.FlagSignaled,
		Local: rdma.LocalSGE(a.MR, 100, 11), Remote: remote(b.MR, 4000)}
	require.NoError(t, a.QP.PostSend(&wr))
	c := wait(t, a.CQ)
	assert.Equal(t, rdma.Completion{ID: 7, Status: rdma.StatusSuccess, Op: rdma.OpWrite, QPN: a.QP.Num(), Bytes: 11}, c)
	assert.Equal(t, "hello, tick", string(b.MR.Bytes()[4000:4011]))
}

func TestQP_WriteInline_CopiesAtPostTime(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	buf := []byte("inline!!")
	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled | rdma.FlagInline,
		Inline: buf, Remote: remote(b.MR, 64)}
	require.NoError(t, a.QP.PostSend(&wr))
	copy(buf, "changed!")
	require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, "inline!!", string(b.MR.Bytes()[64:72]))
}

func TestQP_Unsignaled_CompleteSilentlyInOrder(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	for i := 0; i < 10; i++ {
		binary.LittleEndian.PutUint64(a.MR.Bytes()[i*8:], uint64(i+1))
		wr := rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, i*8, 8), Remote: remote(b.MR, i*8)}
		if i == 9 {
			wr.Flags = rdma.FlagSignaled
		}
		require.NoError(t, a.QP.PostSend(&wr))
	}
	c := wait(t, a.CQ)
	assert.Equal(t, uint64(9), c.ID)
	for i := 0; i < 10; i++ {
		assert.Equal(t, uint64(i+1), binary.LittleEndian.Uint64(b.MR.Bytes()[i*8:]))
	}
	none(t, a.CQ)
}

func TestQP_Read_CopiesPeerMemory(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	copy(b.MR.Bytes()[5000:], "remote bytes")
	wr := rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Flags: rdma.FlagSignaled,
		Local: rdma.LocalSGE(a.MR, 8, 12), Remote: remote(b.MR, 5000)}
	require.NoError(t, a.QP.PostSend(&wr))
	c := wait(t, a.CQ)
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpRead, c.Op)
	assert.Equal(t, uint32(12), c.Bytes)
	assert.Equal(t, "remote bytes", string(a.MR.Bytes()[8:20]))
}

func TestQP_Atomics_ReturnOriginalAndApply(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	w := (*uint64)(unsafe.Pointer(&b.MR.Bytes()[128]))
	atomic.StoreUint64(w, 41)
	orig := func() uint64 { return binary.NativeEndian.Uint64(a.MR.Bytes()[0:8]) }

	faa := rdma.WorkRequest{ID: 1, Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Add: 1,
		Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 128)}
	require.NoError(t, a.QP.PostSend(&faa))
	require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, uint64(41), orig())
	assert.Equal(t, uint64(42), atomic.LoadUint64(w))

	cas := rdma.WorkRequest{ID: 2, Op: rdma.OpCompareAndSwap, Flags: rdma.FlagSignaled, Compare: 42, Swap: 100,
		Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 128)}
	require.NoError(t, a.QP.PostSend(&cas))
	require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, uint64(42), orig())
	assert.Equal(t, uint64(100), atomic.LoadUint64(w))

	// A losing compare returns the current value and stores nothing.
	cas.ID, cas.Compare, cas.Swap = 3, 42, 7
	require.NoError(t, a.QP.PostSend(&cas))
	require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, uint64(100), orig())
	assert.Equal(t, uint64(100), atomic.LoadUint64(w))
}

func TestQP_SendAndWriteImm_ConsumePostedReceives(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	require.NoError(t, b.QP.PostRecv(&rdma.RecvRequest{ID: 50, Local: rdma.LocalSGE(b.MR, 1000, 64)}))
	require.NoError(t, b.QP.PostRecv(&rdma.RecvRequest{ID: 51}))
	copy(a.MR.Bytes()[0:], "a message")
	send := rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagSignaled, Imm: 9, Local: rdma.LocalSGE(a.MR, 0, 9)}
	require.NoError(t, a.QP.PostSend(&send))
	imm := rdma.WorkRequest{ID: 2, Op: rdma.OpWriteImm, Flags: rdma.FlagSignaled, Imm: 0xabcd,
		Local: rdma.LocalSGE(a.MR, 0, 9), Remote: remote(b.MR, 2000)}
	require.NoError(t, a.QP.PostSend(&imm))
	assert.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)

	r1 := wait(t, b.CQ)
	assert.Equal(t, rdma.Completion{ID: 50, Status: rdma.StatusSuccess, Op: rdma.OpRecv, QPN: b.QP.Num(), Bytes: 9, Imm: 9}, r1)
	assert.Equal(t, "a message", string(b.MR.Bytes()[1000:1009]))
	r2 := wait(t, b.CQ)
	assert.Equal(t, rdma.Completion{ID: 51, Status: rdma.StatusSuccess, Op: rdma.OpRecvImm, QPN: b.QP.Num(), Bytes: 9, Imm: 0xabcd}, r2)
	assert.Equal(t, "a message", string(b.MR.Bytes()[2000:2009]))
}

func TestQP_Send_WithoutReceive_IsRNRAndQPGoesToErr(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	send := rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 0, 4)}
	require.NoError(t, a.QP.PostSend(&send))
	assert.Equal(t, rdma.StatusRNRRetryExceeded, wait(t, a.CQ).Status)
	assert.Equal(t, rdma.QPError, a.QP.State())
	none(t, b.CQ)
}

func TestQP_RemoteChecks_FailAndLeaveTargetUntouched(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	cases := []struct {
		name   string
		access rdma.Access
		wr     func(a, b *side) rdma.WorkRequest
		want   rdma.Status
	}{
		{"unknown rkey", all, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, 0, 8),
				Remote: rdma.RemoteAddr{Addr: b.MR.Addr(), RKey: b.MR.RKey() ^ 0x5a5a}}
		}, rdma.StatusRemoteAccess},
		{"write past the end", all, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, 0, 16), Remote: remote(b.MR, len(b.MR.Bytes())-8)}
		}, rdma.StatusRemoteAccess},
		{"write before the start", all, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: rdma.RemoteAddr{Addr: b.MR.Addr() - 8, RKey: b.MR.RKey()}}
		}, rdma.StatusRemoteAccess},
		{"write without remote write", rdma.AccessLocalWrite | rdma.AccessRemoteRead, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
		}, rdma.StatusRemoteAccess},
		{"read without remote read", rdma.AccessLocalWrite | rdma.AccessRemoteWrite, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
		}, rdma.StatusRemoteAccess},
		{"atomic without remote atomic", rdma.AccessLocalWrite | rdma.AccessRemoteWrite, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Add: 1, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
		}, rdma.StatusRemoteAccess},
		{"misaligned atomic", all, func(a, b *side) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Compare: 0, Swap: 1, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 4)}
		}, rdma.StatusRemoteInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newSide(t, openDevice(t, tcp.Config{}), 8, all)
			b := newSide(t, openDevice(t, tcp.Config{}), 8, c.access)
			connect(t, a, b)
			for i := range a.MR.Bytes()[:64] {
				a.MR.Bytes()[i] = 0xee
			}
			wr := c.wr(a, b)
			wr.ID = 99
			require.NoError(t, a.QP.PostSend(&wr))
			got := wait(t, a.CQ)
			assert.Equal(t, c.want, got.Status)
			assert.Equal(t, uint64(99), got.ID)
			assert.Equal(t, make([]byte, len(b.MR.Bytes())), b.MR.Bytes(), "target touched")
			waitFor(t, "requester ERR", func() bool { return a.QP.State() == rdma.QPError })
			// Later requests flush.
			wr.ID = 100
			require.NoError(t, a.QP.PostSend(&wr))
			assert.Equal(t, rdma.Completion{ID: 100, Status: rdma.StatusFlushed, Op: wr.Op, QPN: a.QP.Num()}, wait(t, a.CQ))
		})
	}
}

func TestQP_LocalChecks_FailAtRequester(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	cases := []struct {
		name string
		wr   func(a, b *side, ro rdma.MemoryRegion) rdma.WorkRequest
		want rdma.Status
	}{
		{"unknown lkey", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.SGE{Addr: a.MR.Addr(), Len: 8, LKey: a.MR.LKey() + 1}, Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalProtection},
		{"SGE past its region", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, len(a.MR.Bytes())-4, 8), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalProtection},
		{"read into a region without local write", func(a, b *side, ro rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Local: rdma.LocalSGE(ro, 0, 8), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalProtection},
		{"inline over the limit", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: make([]byte, 4096), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalQPOp},
		{"unknown opcode", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.Opcode(77), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalQPOp},
		{"atomic into 4 bytes", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(a.MR, 0, 4), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalLength},
		{"message over MaxMsgSize", func(a, b *side, _ rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, 0, 8192), Remote: remote(b.MR, 0)}
		}, rdma.StatusLocalLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tcp.Config{MaxMsgSize: 4096}
			a := newSide(t, openDevice(t, cfg), 8, all)
			b := newSide(t, openDevice(t, cfg), 8, all)
			ro, err := a.Dev.RegisterMemory(4096, 0)
			require.NoError(t, err)
			connect(t, a, b)
			wr := c.wr(a, b, ro)
			wr.ID = 5
			require.NoError(t, a.QP.PostSend(&wr))
			got := wait(t, a.CQ)
			assert.Equal(t, c.want, got.Status)
			assert.Equal(t, uint64(5), got.ID)
			assert.Equal(t, rdma.QPError, a.QP.State())
			assert.Equal(t, make([]byte, len(b.MR.Bytes())), b.MR.Bytes(), "target touched")
		})
	}
}
