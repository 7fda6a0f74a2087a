package rdmatest

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// badCase is one request that must fail with want, leave the target's
// memory as it was, and move the requester's QP to ERR.
type badCase struct {
	name string
	want rdma.Status
	// wr builds the request against a fresh pair; regions it makes with
	// x.extraRegion are checked for changes too.
	wr   func(t *testing.T, x *pair) rdma.WorkRequest
	opts pairOpts
}

var errorTests = []test{
	{"BadRequests_CompleteWithStatus_TargetUntouched", testBadRequests},
	{"ErroredQP_FlushesLaterRequests", testErroredQPFlushes},
	{"SendWithoutReceive_RNR", testRNR},
	{"SendLongerThanReceive", testSendTooLong},
	{"PostRecv_BadBuffer_Refused", testPostRecvBad},
	{"NilRequests_Refused", testNilRequests},
}

func badCases() []badCase {
	w := func(t *testing.T, x *pair) rdma.WorkRequest {
		return rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 16), Remote: remote(x.target, 0)}
	}
	return []badCase{
		{name: "Write_UnknownRKey", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Remote.RKey ^= 0x5a5a5a5a
			return wr
		}},
		{name: "Write_PastEnd", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Remote = remote(x.target, len(x.target.Bytes())-8)
			return wr
		}},
		{name: "Write_BeforeStart", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Remote.Addr = x.target.Addr() - 8
			return wr
		}},
		{name: "Write_HugeAddress", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Remote.Addr = ^uint64(0) - 4
			return wr
		}},
		{name: "Read_PastEnd", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Local: rdma.LocalSGE(x.local, 0, 64), Remote: remote(x.target, len(x.target.Bytes())-32)}
		}},
		{name: "Atomic_PastEnd", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, len(x.target.Bytes())), Add: 1}
		}},
		{name: "Write_ToReadOnlyRegion", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Remote = remote(x.extraRegion(t, false, rdma.AccessRemoteRead), 0)
			return wr
		}},
		{name: "Read_FromWriteOnlyRegion", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Local: rdma.LocalSGE(x.local, 0, 16), Remote: remote(x.extraRegion(t, false, rdma.AccessRemoteWrite), 0)}
		}},
		{name: "CAS_OnRegionWithoutAtomic", want: rdma.StatusRemoteAccess, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			mr := x.extraRegion(t, false, rdma.AccessRemoteRead|rdma.AccessRemoteWrite)
			return rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(mr, 0), Compare: u64(mr.Bytes()), Swap: 1}
		}},
		{name: "WriteImm_UnknownRKey", want: rdma.StatusRemoteAccess, opts: pairOpts{}, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 1}))
			wr := w(t, x)
			wr.Op = rdma.OpWriteImm
			wr.Remote.RKey ^= 0x5a5a5a5a
			return wr
		}},
		{name: "CAS_Misaligned", want: rdma.StatusRemoteInvalidRequest, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 4), Compare: u64(x.target.Bytes()[4:]), Swap: 1}
		}},
		{name: "FAA_Misaligned", want: rdma.StatusRemoteInvalidRequest, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 13), Add: 1}
		}},
		{name: "Write_UnknownLKey", want: rdma.StatusLocalProtection, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Local.LKey ^= 0x5a5a5a5a
			return wr
		}},
		{name: "Write_SGEPastLocalRegion", want: rdma.StatusLocalProtection, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Local = rdma.LocalSGE(x.local, len(x.local.Bytes())-8, 16)
			return wr
		}},
		{name: "Read_IntoLocalWithoutLocalWrite", want: rdma.StatusLocalProtection, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Local: rdma.LocalSGE(x.extraRegion(t, true, rdma.AccessRemoteRead), 0, 16), Remote: remote(x.target, 0)}
		}},
		{name: "Write_InlineOverQPLimit", want: rdma.StatusLocalQPOp, opts: pairOpts{maxInline: 16}, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: make([]byte, 17), Remote: remote(x.target, 0)}
		}},
		{name: "UnknownOpcode", want: rdma.StatusLocalQPOp, wr: func(t *testing.T, x *pair) rdma.WorkRequest {
			wr := w(t, x)
			wr.Op = rdma.OpRecv
			return wr
		}},
	}
}

func testBadRequests(t *testing.T, p Provider) {
	for _, bc := range badCases() {
		t.Run(bc.name, func(t *testing.T) {
			x := newPair(t, p, bc.opts)
			wr := bc.wr(t, x)
			wr.ID = 77
			snap := func() [][]byte {
				s := [][]byte{bytes.Clone(x.target.Bytes())}
				for _, mr := range x.extra {
					s = append(s, bytes.Clone(mr.Bytes()))
				}
				return s
			}
			localBefore := bytes.Clone(x.local.Bytes())
			before := snap()
			c := do(t, x.a, x.cqA, wr)
			assert.Equal(t, bc.want, c.Status, "status %s, want %s", c.Status, bc.want)
			assert.Equal(t, before, snap(), "target memory changed by a failed request")
			assert.Equal(t, localBefore, x.local.Bytes(), "local buffer changed by a failed request")
			waitState(t, x.a, rdma.QPError)
		})
	}
}

func testErroredQPFlushes(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	bad := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 8), Remote: rdma.RemoteAddr{Addr: x.target.Addr(), RKey: x.target.RKey() ^ 1}}
	assert.Equal(t, rdma.StatusRemoteAccess, do(t, x.a, x.cqA, bad).Status)
	waitState(t, x.a, rdma.QPError)
	before := bytes.Clone(x.target.Bytes())
	for i, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpRead, rdma.OpCompareAndSwap, rdma.OpFetchAndAdd, rdma.OpSend} {
		wr := rdma.WorkRequest{ID: uint64(10 + i), Op: op, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 0), Add: 1, Swap: 1}
		c := do(t, x.a, x.cqA, wr)
		assert.Equal(t, rdma.StatusFlushed, c.Status, "%s on an errored QP", op)
	}
	// Unsignalled requests complete too when flushed: every error completes.
	require.NoError(t, x.a.PostSend(&rdma.WorkRequest{ID: 20, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 0)}))
	c := waitN(t, x.cqA, 1)[0]
	assert.Equal(t, uint64(20), c.ID)
	assert.Equal(t, rdma.StatusFlushed, c.Status)
	assert.Equal(t, before, x.target.Bytes())
	// Receives posted in ERR are flushed as well.
	require.NoError(t, x.a.PostRecv(&rdma.RecvRequest{ID: 30}))
	c = waitN(t, x.cqA, 1)[0]
	assert.Equal(t, uint64(30), c.ID)
	assert.Equal(t, rdma.StatusFlushed, c.Status)
}

func testRNR(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagInline, Inline: []byte("nobody listens")})
	assert.Equal(t, rdma.StatusRNRRetryExceeded, c.Status)
	waitState(t, x.a, rdma.QPError)

	y := newPair(t, p, pairOpts{})
	before := bytes.Clone(y.target.Bytes())
	c = do(t, y.a, y.cqA, rdma.WorkRequest{ID: 2, Op: rdma.OpWriteImm, Flags: rdma.FlagInline, Inline: []byte("12345678"), Remote: remote(y.target, 0), Imm: 1})
	assert.Equal(t, rdma.StatusRNRRetryExceeded, c.Status)
	assert.Equal(t, before, y.target.Bytes(), "WRITE_WITH_IMM without a receive writes nothing")
	expectNone(t, y.cqB, 20*time.Millisecond)
}

func testSendTooLong(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	rbuf, err := x.devB.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	fillRandom(t, rbuf.Bytes())
	before := bytes.Clone(rbuf.Bytes())
	require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 8, Local: rdma.LocalSGE(rbuf, 0, 4)}))
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagInline, Inline: []byte("longer than four")})
	assert.Equal(t, rdma.StatusRemoteInvalidRequest, c.Status)
	r := waitN(t, x.cqB, 1)[0]
	assert.Equal(t, uint64(8), r.ID)
	assert.Equal(t, rdma.StatusLocalLength, r.Status)
	assert.Equal(t, before[4:], rbuf.Bytes()[4:], "nothing past the receive buffer")
}

func testPostRecvBad(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{recvDepth: 2})
	ro, err := x.devB.RegisterMemory(4096, rdma.AccessRemoteRead)
	require.NoError(t, err)
	assert.Error(t, x.b.PostRecv(&rdma.RecvRequest{Local: rdma.SGE{Addr: x.target.Addr(), Len: 8, LKey: x.target.LKey() ^ 1}}), "unknown lkey")
	assert.Error(t, x.b.PostRecv(&rdma.RecvRequest{Local: rdma.LocalSGE(x.target, 4090, 8)}), "past its region")
	assert.Error(t, x.b.PostRecv(&rdma.RecvRequest{Local: rdma.LocalSGE(ro, 0, 8)}), "no local write")
	require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 1}))
	require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 2}))
	assert.ErrorIs(t, x.b.PostRecv(&rdma.RecvRequest{ID: 3}), rdma.ErrRecvQueueFull)
	// The refused ones consumed nothing: two WRITE_WITH_IMM complete ids 1, 2.
	for i := range 2 {
		c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWriteImm, Flags: rdma.FlagInline, Inline: []byte{1}, Remote: remote(x.target, 0)})
		require.Equal(t, rdma.StatusSuccess, c.Status)
	}
	rs := waitN(t, x.cqB, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{rs[0].ID, rs[1].ID})
}

func testNilRequests(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	assert.ErrorIs(t, x.a.PostSend(nil), rdma.ErrInvalidRequest)
	assert.ErrorIs(t, x.a.PostRecv(nil), rdma.ErrInvalidRequest)
	assert.Equal(t, rdma.QPReadyToSend, x.a.State())
}
