package tcp_test

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

func batchWrite(a, b *side, off, n, dst int, flags rdma.SendFlags) rdma.WorkRequest {
	return rdma.WorkRequest{ID: uint64(dst), Op: rdma.OpWrite, Flags: flags, Local: rdma.LocalSGE(a.MR, off, n), Remote: remote(b.MR, dst)}
}

// A batch lands in order and completes as the same PostSend calls would:
// only its signalled request makes a completion.
func TestQP_PostSendBatch_WritesInOrderAndCompletesAsPostSend(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	src := a.MR.Bytes()
	for i := range 64 {
		src[i] = byte(i + 1)
	}
	binary.LittleEndian.PutUint64(src[64:], 42)
	wrs := []rdma.WorkRequest{
		batchWrite(a, b, 8, 56, 8, 0),                 // body
		batchWrite(a, b, 64, 8, 0, rdma.FlagSignaled), // stamp
		batchWrite(a, b, 0, 64, 128, 0),               // another slot
		{ID: 7, Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Add: 3, Local: rdma.LocalSGE(a.MR, 256, 8), Remote: remote(b.MR, 512)},
	}
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	c := wait(t, a.CQ)
	assert.Equal(t, uint64(0), c.ID, "the stamp first")
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	c = wait(t, a.CQ)
	assert.Equal(t, uint64(7), c.ID)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	none(t, a.CQ)
	dst := b.MR.Bytes()
	assert.Equal(t, uint64(42), binary.LittleEndian.Uint64(dst[0:]))
	assert.Equal(t, src[8:64], dst[8:64])
	assert.Equal(t, src[0:64], dst[128:192])
	assert.Equal(t, uint64(3), binary.LittleEndian.Uint64(dst[512:]))
}

// A request with a local error mid-batch completes with it, after the
// requests before it were sent; the QP moves to ERR and later posts are
// flushed.
func TestQP_PostSendBatch_LocalErrorMidBatchFailsThatRequest(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	binary.LittleEndian.PutUint64(a.MR.Bytes(), 5)
	bad := batchWrite(a, b, 0, 8, 16, rdma.FlagSignaled)
	bad.Local.LKey ^= 0xffff
	wrs := []rdma.WorkRequest{
		batchWrite(a, b, 0, 8, 0, rdma.FlagSignaled),
		bad,
		batchWrite(a, b, 0, 8, 24, rdma.FlagSignaled),
	}
	n, err := rdma.PostSendBatch(a.QP, wrs)
	require.NoError(t, err, "a failed request is a completion, not an error of the call")
	require.Equal(t, 3, n)
	var st []rdma.Status
	for range 3 {
		st = append(st, wait(t, a.CQ).Status)
	}
	assert.Contains(t, [][]rdma.Status{
		{rdma.StatusSuccess, rdma.StatusLocalProtection, rdma.StatusFlushed},
		{rdma.StatusFlushed, rdma.StatusLocalProtection, rdma.StatusFlushed}, // the ERR came before the first's ACK
	}, st)
	assert.Equal(t, rdma.QPError, a.QP.State())
	assert.Zero(t, binary.LittleEndian.Uint64(b.MR.Bytes()[24:]), "a flushed WRITE changes nothing")
}

// A batch longer than the send queue posts what fits and says why it
// stopped; nothing after the refused request is queued.
func TestQP_PostSendBatch_FullQueueStopsTheBatch(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	wrs := make([]rdma.WorkRequest, 80) // the rig's send queue holds 64
	for i := range wrs {
		wrs[i] = batchWrite(a, b, 0, 8, 8*(i%64), 0)
	}
	wrs[63].Flags = rdma.FlagSignaled
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs)
	require.ErrorIs(t, err, rdma.ErrSendQueueFull)
	require.Equal(t, 64, n)
	c := wait(t, a.CQ)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64(8*63), c.ID)
	none(t, a.CQ)
	assert.Zero(t, a.QP.(*tcp.QP).Outstanding())
}

// The tcp post path stays free of allocations in a batch too.
func TestQP_PostSendBatch_AllocatesNothing(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	wrs := []rdma.WorkRequest{batchWrite(a, b, 8, 56, 8, 0), batchWrite(a, b, 0, 8, 0, rdma.FlagSignaled)}
	var cs [4]rdma.Completion
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs); err != nil {
			t.Fatal(err)
		}
		for a.CQ.Poll(cs[:]) == 0 {
			runtime.Gosched()
		}
	})
	assert.Zero(t, allocs)
}

// WRITEs posted together to one region travel as one WRITE list, and each
// is still checked at the target as if it came alone: one out of bounds
// completes with StatusRemoteAccess, the one before it landed, the one
// after it is flushed and lands nowhere, and the target counts the error.
func TestQP_PostSendBatch_RemoteAccessErrorMidListFailsThatWrite(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	binary.LittleEndian.PutUint64(a.MR.Bytes(), 0x0102030405060708)
	out := batchWrite(a, b, 0, 8, 0, rdma.FlagSignaled)
	out.Remote.Addr += uint64(len(b.MR.Bytes())) // just past the region
	wrs := []rdma.WorkRequest{batchWrite(a, b, 0, 8, 0, rdma.FlagSignaled), out, batchWrite(a, b, 0, 8, 16, rdma.FlagSignaled)}
	before := b.Dev.RemoteAccessErrors()
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	var st []rdma.Status
	for range 3 {
		st = append(st, wait(t, a.CQ).Status)
	}
	assert.Equal(t, []rdma.Status{rdma.StatusSuccess, rdma.StatusRemoteAccess, rdma.StatusFlushed}, st)
	assert.Equal(t, uint64(0x0102030405060708), binary.LittleEndian.Uint64(b.MR.Bytes()[0:]))
	assert.Zero(t, binary.LittleEndian.Uint64(b.MR.Bytes()[16:]), "the WRITE after the refused one changes nothing")
	assert.Equal(t, before+1, b.Dev.RemoteAccessErrors())
	assert.Equal(t, rdma.QPError, a.QP.State())
}

// A WRITE list to a confined QP is checked against its grant WRITE by
// WRITE: the one outside the granted range is refused, the one inside
// landed.
func TestQP_PostSendBatch_ListOutsideTheGrantIsRefused(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	g, err := b.QP.GrantRange(b.MR, 0, 64, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(a.MR.Bytes(), 7)
	in := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: rdma.RemoteAddr{Addr: g.Addr + 56, RKey: g.RKey}}
	out := in
	out.ID, out.Remote.Addr = 2, g.Addr+64 // just past the grant, inside the region
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch([]rdma.WorkRequest{in, out})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	assert.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	assert.Equal(t, rdma.StatusRemoteAccess, wait(t, a.CQ).Status)
	assert.Equal(t, uint64(7), binary.LittleEndian.Uint64(b.MR.Bytes()[56:]))
	assert.Zero(t, binary.LittleEndian.Uint64(b.MR.Bytes()[64:]))
}
