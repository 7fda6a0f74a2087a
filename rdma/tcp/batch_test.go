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

// The tcp post path stays free of allocations in a batch too: a tick
// (body, stamp) and a lossy ring's batch (runs of StampBusy and stamps).
func TestQP_PostSendBatch_AllocatesNothing(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	for name, wrs := range map[string][]rdma.WorkRequest{
		"tick":  {batchWrite(a, b, 8, 56, 8, 0), batchWrite(a, b, 0, 8, 0, rdma.FlagSignaled)},
		"batch": ringBatch(a, b, 16, 96, 4096, 1024, 2048),
	} {
		var cs [4]rdma.Completion
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs); err != nil {
				t.Fatal(err)
			}
			for a.CQ.Poll(cs[:]) == 0 {
				runtime.Gosched()
			}
		})
		assert.Zero(t, allocs, name)
	}
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

// ringBatch is a lossy ring's batch of k slots of size slot, as
// ring.Writer posts it: StampBusy into each slot, one WRITE of the bodies
// (from the staging images at img, the stamps they cover holding busy),
// then each slot's stamp from stamps, the last signalled.
func ringBatch(a, b *side, k, slot, img, stamps, busy int) []rdma.WorkRequest {
	var wrs []rdma.WorkRequest
	for j := 0; j < k; j++ {
		wrs = append(wrs, batchWrite(a, b, busy, 8, j*slot, 0))
	}
	wrs = append(wrs, batchWrite(a, b, img+8, k*slot-8, 8, 0))
	for j := 0; j < k; j++ {
		f := rdma.SendFlags(0)
		if j == k-1 {
			f = rdma.FlagSignaled
		}
		wrs = append(wrs, batchWrite(a, b, stamps+8*j, 8, j*slot, f))
	}
	return wrs
}

// A lossy ring's batch (its StampBusy and stamp WRITEs travel as runs,
// frame.go) lands as its WRITEs one by one would leave it: every body, and
// every stamp its sequence.
func TestQP_PostSendBatch_RingBatchLandsWhole(t *testing.T) {
	const k, slot, img, stamps, busy = 16, 96, 4096, 1024, 2048
	a, b := pair(t, tcp.Config{})
	src := a.MR.Bytes()
	binary.LittleEndian.PutUint64(src[busy:], ^uint64(0))
	want := make([]byte, k*slot)
	for j := 0; j < k; j++ {
		im := src[img+j*slot : img+(j+1)*slot]
		binary.LittleEndian.PutUint64(im, ^uint64(0))
		for i := 8; i < slot; i++ {
			im[i] = byte(j*7 + i)
		}
		binary.LittleEndian.PutUint64(src[stamps+8*j:], uint64(100+j))
		copy(want[j*slot:], im)
		binary.LittleEndian.PutUint64(want[j*slot:], uint64(100+j))
	}
	wrs := ringBatch(a, b, k, slot, img, stamps, busy)
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)
	c := wait(t, a.CQ)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, uint64((k-1)*slot), c.ID, "the last stamp's")
	none(t, a.CQ)
	assert.Equal(t, want, b.MR.Bytes()[:k*slot])
}

// A run of stamps that crosses the end of a confined QP's grant is checked
// WRITE by WRITE: the stamps inside land, the first outside is refused
// and the rest are flushed, landing nowhere.
func TestQP_PostSendBatch_RunAcrossTheGrantEndIsRefusedThere(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	g, err := b.QP.GrantRange(b.MR, 0, 256, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	var wrs []rdma.WorkRequest
	for j := 0; j < 4; j++ {
		binary.LittleEndian.PutUint64(a.MR.Bytes()[8*j:], uint64(j+1))
		wrs = append(wrs, rdma.WorkRequest{ID: uint64(j), Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 8*j, 8),
			Remote: rdma.RemoteAddr{Addr: g.Addr + 96*uint64(j), RKey: g.RKey}}) // 0, 96, 192 inside; 288 past the grant
	}
	n, err := a.QP.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	var st []rdma.Status
	for range 4 {
		st = append(st, wait(t, a.CQ).Status)
	}
	assert.Equal(t, []rdma.Status{rdma.StatusSuccess, rdma.StatusSuccess, rdma.StatusSuccess, rdma.StatusRemoteAccess}, st)
	for j := 0; j < 3; j++ {
		assert.Equal(t, uint64(j+1), binary.LittleEndian.Uint64(b.MR.Bytes()[96*j:]))
	}
	assert.Zero(t, binary.LittleEndian.Uint64(b.MR.Bytes()[288:]), "past the grant")
}
