package rdmatest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var opTests = []test{
	{"Write_FromSGE", func(t *testing.T, p Provider) { testWrite(t, p, false, false) }},
	{"Write_Inline", func(t *testing.T, p Provider) { testWrite(t, p, true, false) }},
	{"Write_Loopback", func(t *testing.T, p Provider) { testWrite(t, p, false, true) }},
	{"Write_ZeroLength", testWriteZero},
	{"Write_8ByteAligned", testWrite8},
	{"Read", testRead},
	{"CompareAndSwap_HitAndMiss", testCAS},
	{"FetchAndAdd", testFAA},
	{"WriteWithImm_CompletesReceive", testWriteImm},
	{"SendRecv_DeliversInOrder", testSendRecv},
	{"SendRecv_Loopback", testSendRecvLoopback},
	{"AllOps_Loopback", testAllLoopback},
}

func testWrite(t *testing.T, p Provider, inline, loopback bool) {
	x := newPair(t, p, pairOpts{loopback: loopback})
	msg := []byte("market data tick: ESZ6 5123.25 x 10")
	wr := rdma.WorkRequest{ID: 7, Op: rdma.OpWrite, Remote: remote(x.target, 1000)}
	if inline {
		wr.Flags = rdma.FlagInline
		wr.Inline = append([]byte(nil), msg...)
	} else {
		copy(x.local.Bytes()[300:], msg)
		wr.Local = rdma.LocalSGE(x.local, 300, len(msg))
	}
	before := bytes.Clone(x.target.Bytes())
	require.NoError(t, x.a.PostSend(&rdma.WorkRequest{ID: 6, Op: rdma.OpWrite, Flags: wr.Flags, Inline: wr.Inline, Local: wr.Local, Remote: remote(x.target, 2000)}))
	if inline {
		clear(wr.Inline) // PostSend copied it
		copy(wr.Inline, msg)
	}
	c := do(t, x.a, x.cqA, wr)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpWrite, c.Op)
	want := bytes.Clone(before)
	copy(want[1000:], msg)
	copy(want[2000:], msg)
	assert.Equal(t, want, x.target.Bytes(), "exactly the written bytes changed")
}

func testWriteZero(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	before := bytes.Clone(x.target.Bytes())
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 0), Remote: remote(x.target, 8)})
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, before, x.target.Bytes())
}

func testWrite8(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	putU64(x.local.Bytes()[16:], 0x0102030405060708)
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 16, 8), Remote: remote(x.target, 64)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64(0x0102030405060708), u64(x.target.Bytes()[64:]))
}

func testRead(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Local: rdma.LocalSGE(x.local, 10, 777), Remote: remote(x.target, 2048)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpRead, c.Op)
	assert.Equal(t, uint32(777), c.Bytes)
	assert.Equal(t, x.target.Bytes()[2048:2048+777], x.local.Bytes()[10:10+777])
	c = do(t, x.a, x.cqA, rdma.WorkRequest{ID: 4, Op: rdma.OpRead, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 8)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, u64(x.target.Bytes()[8:]), u64(x.local.Bytes()))
}

func testCAS(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	putU64(x.target.Bytes()[64:], 41)
	cas := func(id, cmp, swap uint64) rdma.Completion {
		return do(t, x.a, x.cqA, rdma.WorkRequest{ID: id, Op: rdma.OpCompareAndSwap, Local: rdma.LocalSGE(x.local, 0, 8),
			Remote: remote(x.target, 64), Compare: cmp, Swap: swap})
	}
	c := cas(1, 41, 42)
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpCompareAndSwap, c.Op)
	assert.Equal(t, uint64(41), u64(x.local.Bytes()), "original value returned")
	assert.Equal(t, uint64(42), u64(x.target.Bytes()[64:]), "swapped")
	c = cas(2, 41, 99)
	require.Equal(t, rdma.StatusSuccess, c.Status, "a compare that misses still succeeds")
	assert.Equal(t, uint64(42), u64(x.local.Bytes()), "the current value returned")
	assert.Equal(t, uint64(42), u64(x.target.Bytes()[64:]), "not swapped")
}

func testFAA(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	putU64(x.target.Bytes()[128:], 1000)
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.local, 8, 8), Remote: remote(x.target, 128), Add: 24})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpFetchAndAdd, c.Op)
	assert.Equal(t, uint64(1000), u64(x.local.Bytes()[8:]))
	assert.Equal(t, uint64(1024), u64(x.target.Bytes()[128:]))
	c = do(t, x.a, x.cqA, rdma.WorkRequest{ID: 2, Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.local, 8, 8), Remote: remote(x.target, 128), Add: ^uint64(0)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64(1023), u64(x.target.Bytes()[128:]), "adding 2^64-1 wraps to minus one")
}

func testWriteImm(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 50}))
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 5, Op: rdma.OpWriteImm, Flags: rdma.FlagInline, Inline: []byte("stamp+payload"),
		Remote: remote(x.target, 512), Imm: 0xfeedbeef})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, rdma.OpWriteImm, c.Op)
	r := waitN(t, x.cqB, 1)[0]
	assert.Equal(t, uint64(50), r.ID)
	assert.Equal(t, rdma.StatusSuccess, r.Status)
	assert.Equal(t, rdma.OpRecvImm, r.Op)
	assert.Equal(t, uint32(0xfeedbeef), r.Imm)
	assert.Equal(t, uint32(13), r.Bytes)
	assert.Equal(t, x.b.Num(), r.QPN)
	assert.Equal(t, "stamp+payload", string(x.target.Bytes()[512:525]), "the data is there when the receive completes")
}

func testSendRecv(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	rbuf, err := x.devB.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: uint64(100 + i), Local: rdma.LocalSGE(rbuf, i*1024, 1024)}))
	}
	msgs := []string{"one", "two two", "three three three", ""}
	copy(x.local.Bytes(), "from a registered buffer")
	for i, m := range msgs {
		wr := rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Flags: rdma.FlagInline, Inline: []byte(m)}
		if i == 3 {
			wr = rdma.WorkRequest{ID: uint64(i), Op: rdma.OpSend, Local: rdma.LocalSGE(x.local, 0, 24)}
			msgs[3] = "from a registered buffer"
		}
		c := do(t, x.a, x.cqA, wr)
		require.Equal(t, rdma.StatusSuccess, c.Status, "send %d", i)
		assert.Equal(t, rdma.OpSend, c.Op)
	}
	rs := waitN(t, x.cqB, 4)
	for i, r := range rs {
		assert.Equal(t, uint64(100+i), r.ID, "receives complete in post order")
		assert.Equal(t, rdma.StatusSuccess, r.Status)
		assert.Equal(t, rdma.OpRecv, r.Op)
		assert.Equal(t, uint32(len(msgs[i])), r.Bytes)
		assert.Equal(t, msgs[i], string(rbuf.Bytes()[i*1024:i*1024+len(msgs[i])]))
	}
}

func testSendRecvLoopback(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{loopback: true})
	rbuf, err := x.devB.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	require.NoError(t, x.b.PostRecv(&rdma.RecvRequest{ID: 9, Local: rdma.LocalSGE(rbuf, 0, 64)}))
	require.NoError(t, x.a.PostSend(&rdma.WorkRequest{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("loop")}))
	got := map[uint64]rdma.Completion{}
	for _, c := range waitN(t, x.cqA, 2) { // one CQ serves both QPs
		got[c.ID] = c
	}
	assert.Equal(t, rdma.StatusSuccess, got[1].Status)
	assert.Equal(t, rdma.OpRecv, got[9].Op)
	assert.Equal(t, "loop", string(rbuf.Bytes()[:4]))
}

// testAllLoopback runs every opcode through a QP connected to another QP
// of its own device.
func testAllLoopback(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{loopback: true})
	copy(x.local.Bytes(), "abcdefgh")
	putU64(x.target.Bytes()[8:], 5)
	ops := []rdma.WorkRequest{
		{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 0)},
		{ID: 2, Op: rdma.OpRead, Local: rdma.LocalSGE(x.local, 100, 8), Remote: remote(x.target, 0)},
		{ID: 3, Op: rdma.OpCompareAndSwap, Local: rdma.LocalSGE(x.local, 200, 8), Remote: remote(x.target, 8), Compare: 5, Swap: 6},
		{ID: 4, Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.local, 208, 8), Remote: remote(x.target, 8), Add: 10},
	}
	for _, wr := range ops {
		c := do(t, x.a, x.cqA, wr)
		require.Equal(t, rdma.StatusSuccess, c.Status, "%s", wr.Op)
	}
	assert.Equal(t, "abcdefgh", string(x.target.Bytes()[:8]))
	assert.Equal(t, "abcdefgh", string(x.local.Bytes()[100:108]))
	assert.Equal(t, uint64(5), u64(x.local.Bytes()[200:]))
	assert.Equal(t, uint64(6), u64(x.local.Bytes()[208:]))
	assert.Equal(t, uint64(16), u64(x.target.Bytes()[8:]))
}
