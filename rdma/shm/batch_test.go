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

// batchRig is a QP of send depth depth connected to a QP on another
// device, a local buffer and a remotely writable target region.
func batchRig(t *testing.T, depth int) (rdma.QueuePair, rdma.CompletionQueue, rdma.MemoryRegion, rdma.MemoryRegion) {
	t.Helper()
	open := func() rdma.Device {
		d, err := shm.Open(shm.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	da, db := open(), open()
	cqa, err := da.CreateCQ(64)
	require.NoError(t, err)
	cqb, err := db.CreateCQ(64)
	require.NoError(t, err)
	qa, err := da.CreateQP(rdma.QPConfig{SendCQ: cqa, RecvCQ: cqa, SendDepth: depth, RecvDepth: 1})
	require.NoError(t, err)
	qb, err := db.CreateQP(rdma.QPConfig{SendCQ: cqb, RecvCQ: cqb, SendDepth: depth, RecvDepth: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, qa.Connect(ctx, qb.LocalEndpoint()))
	require.NoError(t, qb.Connect(ctx, qa.LocalEndpoint()))
	local, err := da.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	target, err := db.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	return qa, cqa, local, target
}

func writeWR(local, target rdma.MemoryRegion, off, n int, dst int, flags rdma.SendFlags) rdma.WorkRequest {
	return rdma.WorkRequest{ID: uint64(dst), Op: rdma.OpWrite, Flags: flags, Local: rdma.LocalSGE(local, off, n),
		Remote: rdma.RemoteAddr{Addr: target.Addr() + uint64(dst), RKey: target.RKey()}}
}

func TestQP_PostSendBatch_WritesInOrderAndCompletesAsPostSend(t *testing.T) {
	qp, cq, local, target := batchRig(t, 16)
	src := local.Bytes()
	for i := range 64 {
		src[i] = byte(i + 1)
	}
	binary.LittleEndian.PutUint64(src[64:], 42)
	wrs := []rdma.WorkRequest{
		writeWR(local, target, 8, 56, 8, 0),                 // body
		writeWR(local, target, 64, 8, 0, rdma.FlagSignaled), // stamp
		writeWR(local, target, 0, 64, 128, 0),               // another slot
	}
	n, err := qp.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	dst := target.Bytes()
	assert.Equal(t, uint64(42), binary.LittleEndian.Uint64(dst[0:]))
	assert.Equal(t, src[8:64], dst[8:64])
	assert.Equal(t, src[0:64], dst[128:192])
	comps := make([]rdma.Completion, 8)
	got := cq.Poll(comps)
	require.Equal(t, 1, got, "only the signalled request completes")
	assert.Equal(t, uint64(0), comps[0].ID)
	assert.Equal(t, rdma.StatusSuccess, comps[0].Status)
	assert.Equal(t, uint32(8), comps[0].Bytes)
}

func TestQP_PostSendBatch_ErrorCompletionFlushesTheRest(t *testing.T) {
	qp, cq, local, target := batchRig(t, 16)
	bad := writeWR(local, target, 0, 8, 0, 0)
	bad.Remote.RKey ^= 0xffff // unknown rkey: the target refuses it
	after := writeWR(local, target, 0, 8, 64, rdma.FlagSignaled)
	binary.LittleEndian.PutUint64(local.Bytes(), 7)
	n, err := rdma.PostSendBatch(qp, []rdma.WorkRequest{bad, after})
	require.NoError(t, err, "a refused request is a completion, not an error of the call")
	require.Equal(t, 2, n)
	comps := make([]rdma.Completion, 8)
	require.Equal(t, 2, cq.Poll(comps))
	assert.Equal(t, rdma.StatusRemoteAccess, comps[0].Status)
	assert.Equal(t, rdma.StatusFlushed, comps[1].Status)
	assert.Equal(t, rdma.QPError, qp.State())
	assert.Zero(t, binary.LittleEndian.Uint64(target.Bytes()[64:]), "a flushed WRITE changes nothing")
}

// A chain whose leading WRITEs take the fast run and whose later requests
// do not (a refused WRITE, then one it flushes) completes exactly as
// PostSend one by one would.
func TestQP_PostSendBatch_RefusedWriteAfterGoodOnesFlushesTheRest(t *testing.T) {
	qp, cq, local, target := batchRig(t, 16)
	binary.LittleEndian.PutUint64(local.Bytes(), 5)
	bad := writeWR(local, target, 0, 8, 16, rdma.FlagSignaled)
	bad.Remote.Addr = target.Addr() + 4096 - 4 // past the region's end
	wrs := []rdma.WorkRequest{
		writeWR(local, target, 0, 8, 0, 0),
		writeWR(local, target, 0, 8, 8, rdma.FlagSignaled),
		bad,
		writeWR(local, target, 0, 8, 24, rdma.FlagSignaled),
	}
	n, err := qp.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	dst := target.Bytes()
	assert.Equal(t, uint64(5), binary.LittleEndian.Uint64(dst[0:]))
	assert.Equal(t, uint64(5), binary.LittleEndian.Uint64(dst[8:]))
	assert.Zero(t, binary.LittleEndian.Uint64(dst[16:]), "refused")
	assert.Zero(t, binary.LittleEndian.Uint64(dst[24:]), "flushed")
	assert.Zero(t, binary.LittleEndian.Uint32(dst[4092:]), "nothing written past the end")
	comps := make([]rdma.Completion, 8)
	require.Equal(t, 3, cq.Poll(comps))
	assert.Equal(t, []rdma.Status{rdma.StatusSuccess, rdma.StatusRemoteAccess, rdma.StatusFlushed},
		[]rdma.Status{comps[0].Status, comps[1].Status, comps[2].Status})
	assert.Equal(t, rdma.QPError, qp.State())
}

// Requests that switch between local offsets, then one with an unknown
// lkey mid-chain: the good ones land where each says, the bad one fails
// with a local protection error, and the rest is flushed.
func TestQP_PostSendBatch_UnknownLocalKeyMidChainFailsThatRequest(t *testing.T) {
	qp, cq, local, target := batchRig(t, 16)
	binary.LittleEndian.PutUint64(local.Bytes()[0:], 1)
	binary.LittleEndian.PutUint64(local.Bytes()[8:], 2)
	unknownL := writeWR(local, target, 0, 8, 40, 0)
	unknownL.Local.LKey ^= 0xffff
	wrs := []rdma.WorkRequest{
		writeWR(local, target, 0, 8, 0, 0),
		writeWR(local, target, 8, 8, 8, 0),
		writeWR(local, target, 0, 8, 16, rdma.FlagSignaled),
		unknownL,
		writeWR(local, target, 8, 8, 48, rdma.FlagSignaled),
	}
	n, err := qp.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	dst := target.Bytes()
	assert.Equal(t, []uint64{1, 2, 1, 0, 0, 0, 0},
		[]uint64{binary.LittleEndian.Uint64(dst[0:]), binary.LittleEndian.Uint64(dst[8:]), binary.LittleEndian.Uint64(dst[16:]),
			binary.LittleEndian.Uint64(dst[24:]), binary.LittleEndian.Uint64(dst[32:]), binary.LittleEndian.Uint64(dst[40:]),
			binary.LittleEndian.Uint64(dst[48:])})
	comps := make([]rdma.Completion, 8)
	require.Equal(t, 3, cq.Poll(comps))
	assert.Equal(t, []rdma.Status{rdma.StatusSuccess, rdma.StatusLocalProtection, rdma.StatusFlushed},
		[]rdma.Status{comps[0].Status, comps[1].Status, comps[2].Status})
}

// Other ops in a chain (a READ between WRITEs) run in order with them.
func TestQP_PostSendBatch_MixedOpsRunInOrder(t *testing.T) {
	qp, cq, local, target := batchRig(t, 16)
	binary.LittleEndian.PutUint64(local.Bytes(), 11)
	read := rdma.WorkRequest{ID: 99, Op: rdma.OpRead, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 64, 8),
		Remote: rdma.RemoteAddr{Addr: target.Addr(), RKey: target.RKey()}}
	wrs := []rdma.WorkRequest{writeWR(local, target, 0, 8, 0, 0), read, writeWR(local, target, 64, 8, 8, rdma.FlagSignaled)}
	n, err := qp.(rdma.BatchPoster).PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	assert.Equal(t, uint64(11), binary.LittleEndian.Uint64(local.Bytes()[64:]), "the READ saw the WRITE before it")
	assert.Equal(t, uint64(11), binary.LittleEndian.Uint64(target.Bytes()[8:]), "the WRITE after the READ wrote what it read")
	comps := make([]rdma.Completion, 8)
	require.Equal(t, 2, cq.Poll(comps))
	assert.Equal(t, uint64(99), comps[0].ID)
}

func TestQP_PostSendBatch_StopsAtFullSendQueue(t *testing.T) {
	qp, cq, local, target := batchRig(t, 4)
	binary.LittleEndian.PutUint64(local.Bytes(), 9)
	wrs := make([]rdma.WorkRequest, 6)
	for i := range wrs {
		wrs[i] = writeWR(local, target, 0, 8, 8*i, rdma.FlagSignaled)
	}
	n, err := qp.(rdma.BatchPoster).PostSendBatch(wrs)
	require.ErrorIs(t, err, rdma.ErrSendQueueFull)
	require.Equal(t, 4, n, "the send queue holds 4")
	dst := target.Bytes()
	for i := range wrs {
		want := uint64(0)
		if i < n {
			want = 9
		}
		assert.Equal(t, want, binary.LittleEndian.Uint64(dst[8*i:]), "slot %d", i)
	}
	comps := make([]rdma.Completion, 8)
	require.Equal(t, 4, cq.Poll(comps))
	// Room again: the rest goes.
	n, err = qp.(rdma.BatchPoster).PostSendBatch(wrs[4:])
	require.NoError(t, err)
	require.Equal(t, 2, n)
	assert.Equal(t, uint64(9), binary.LittleEndian.Uint64(dst[8*5:]))
}

func TestQP_PostSendBatch_AfterCloseFailsAndDoesNothing(t *testing.T) {
	qp, _, local, target := batchRig(t, 4)
	require.NoError(t, qp.Close())
	n, err := qp.(rdma.BatchPoster).PostSendBatch([]rdma.WorkRequest{writeWR(local, target, 0, 8, 0, 0)})
	require.ErrorIs(t, err, rdma.ErrClosed)
	assert.Zero(t, n)
	n, err = qp.(rdma.BatchPoster).PostSendBatch(nil)
	require.NoError(t, err, "an empty batch posts nothing")
	assert.Zero(t, n)
}

func TestQP_PostSendBatch_AllocatesNothing(t *testing.T) {
	qp, cq, local, target := batchRig(t, 64)
	wrs := []rdma.WorkRequest{
		writeWR(local, target, 8, 56, 8, 0),
		writeWR(local, target, 0, 8, 0, rdma.FlagSignaled),
	}
	comps := make([]rdma.Completion, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := rdma.PostSendBatch(qp, wrs); err != nil {
			t.Fatal(err)
		}
		cq.Poll(comps)
	})
	assert.Zero(t, allocs)
}

// onlyPostSend hides the shm QP's PostSendBatch: what a provider without
// one looks like to rdma.PostSendBatch.
type onlyPostSend struct{ rdma.QueuePair }

func TestPostSendBatch_WithoutBatchPosterPostsOneByOne(t *testing.T) {
	qp, _, local, target := batchRig(t, 2)
	binary.LittleEndian.PutUint64(local.Bytes(), 5)
	wrs := []rdma.WorkRequest{
		writeWR(local, target, 0, 8, 0, rdma.FlagSignaled),
		writeWR(local, target, 0, 8, 8, rdma.FlagSignaled),
		writeWR(local, target, 0, 8, 16, rdma.FlagSignaled),
	}
	var q rdma.QueuePair = onlyPostSend{qp}
	_, isBatch := q.(rdma.BatchPoster)
	require.False(t, isBatch)
	n, err := rdma.PostSendBatch(q, wrs)
	require.ErrorIs(t, err, rdma.ErrSendQueueFull)
	assert.Equal(t, 2, n)
	dst := target.Bytes()
	assert.Equal(t, uint64(5), binary.LittleEndian.Uint64(dst[8:]))
	assert.Zero(t, binary.LittleEndian.Uint64(dst[16:]))
}

// BenchmarkWriteSlotBatch is the ring's lossy slot write (busy, 56-byte
// body, stamp) as three PostSend calls and as one PostSendBatch; every
// 16th slot signalled and reaped.
func BenchmarkWriteSlotBatch(b *testing.B) {
	for _, batch := range []bool{false, true} {
		name := "PostSend×3"
		if batch {
			name = "PostSendBatch"
		}
		b.Run(name, func(b *testing.B) {
			qp, cq, local, target := benchPair(b)
			wrs := []rdma.WorkRequest{
				writeWR(local, target, 64, 8, 128, 0),
				writeWR(local, target, 8, 56, 136, 0),
				writeWR(local, target, 0, 8, 128, 0),
			}
			comps := make([]rdma.Completion, 16)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				wrs[2].Flags = 0
				if i%16 == 0 {
					wrs[2].Flags = rdma.FlagSignaled
				}
				if batch {
					if _, err := qp.(rdma.BatchPoster).PostSendBatch(wrs); err != nil {
						b.Fatal(err)
					}
				} else {
					for j := range wrs {
						if err := qp.PostSend(&wrs[j]); err != nil {
							b.Fatal(err)
						}
					}
				}
				if i%16 == 0 {
					cq.Poll(comps)
				}
			}
		})
	}
}
