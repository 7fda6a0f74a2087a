package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// slotWRs are the work requests PostSlot stands for: (busy: StampBusy,)
// body, stamp, into the slot at dst, from src's bytes at 0 (StampBusy), 8
// (body) and 8+len(body) (stamp).
func slotWRs(src, dst rdma.MemoryRegion, at uint64, n int, busy, signaled bool) []rdma.WorkRequest {
	var wrs []rdma.WorkRequest
	d := dst.Remote().Addr + at
	if busy {
		wrs = append(wrs, rdma.WorkRequest{ID: 9, Op: rdma.OpWrite, Local: rdma.LocalSGE(src, 0, 8), Remote: rdma.RemoteAddr{Addr: d, RKey: dst.RKey()}})
	}
	f := rdma.SendFlags(0)
	if signaled {
		f = rdma.FlagSignaled
	}
	return append(wrs,
		rdma.WorkRequest{ID: 9, Op: rdma.OpWrite, Local: rdma.LocalSGE(src, 8, n), Remote: rdma.RemoteAddr{Addr: d + 8, RKey: dst.RKey()}},
		rdma.WorkRequest{ID: 9, Op: rdma.OpWrite, Flags: f, Local: rdma.LocalSGE(src, 8+n, 8), Remote: rdma.RemoteAddr{Addr: d, RKey: dst.RKey()}})
}

// PostSlot puts on the wire, byte for byte, what PostSendBatch of the
// slot's work requests does, and queues the same send queue entries.
func TestQP_PostSlot_IsTheBatchsFrame(t *testing.T) {
	for _, busy := range []bool{false, true} {
		for _, signaled := range []bool{false, true} {
			qa, src, dst := postOnly(t, 64)
			qb, _, _ := postOnly(t, 64)
			b := src.Bytes()
			binary.LittleEndian.PutUint64(b, ^uint64(0))
			for i := 8; i < 96; i++ {
				b[i] = byte(i)
			}
			binary.LittleEndian.PutUint64(b[96:], 77)
			for round := 0; round < 3; round++ { // later rounds: ack flags from the counters both keep
				n, err := qa.PostSendBatch(slotWRs(src, dst, 96, 88, busy, signaled))
				require.NoError(t, err)
				require.Equal(t, len(slotWRs(src, dst, 96, 88, busy, signaled)), n)
				require.NoError(t, qb.PostSlot(dst.RKey(), dst.Remote().Addr+96, b[8:96], 77, ^uint64(0), busy, 9, signaled))
			}
			assert.Equal(t, qa.tx.w, qb.tx.w, "busy=%v signaled=%v", busy, signaled)
			assert.True(t, bytes.Equal(qa.tx.buf[:qa.tx.w], qb.tx.buf[:qb.tx.w]), "busy=%v signaled=%v: frames differ", busy, signaled)
			assert.Equal(t, qa.npos, qb.npos)
			assert.Equal(t, qa.posted, qb.posted)
			assert.Equal(t, qa.sq[:qa.npos], qb.sq[:qb.npos])
			assert.Equal(t, qa.tx.wpos.Load(), qb.tx.wpos.Load(), "published")
			qa.drained(int(qa.npos)) // nothing outstanding: Close does not linger
			qb.drained(int(qb.npos))
		}
	}
}

// PostSlot declines, queueing nothing, what it does not take the short
// way: a QP not ready to send, a full send queue, a frame that would wrap
// the send buffer.
func TestQP_PostSlot_DeclinesAndQueuesNothing(t *testing.T) {
	body := make([]byte, 88)
	q, _, dst := postOnly(t, 4)
	q.state.Store(uint32(rdma.QPInit))
	assert.ErrorIs(t, q.PostSlot(dst.RKey(), dst.Remote().Addr, body, 1, 0, false, 1, false), rdma.ErrQPState)
	assert.Zero(t, q.npos)
	assert.Zero(t, q.tx.w)

	q.state.Store(uint32(rdma.QPReadyToSend))
	require.NoError(t, q.PostSlot(dst.RKey(), dst.Remote().Addr, body, 1, 0, false, 1, false))
	require.NoError(t, q.PostSlot(dst.RKey(), dst.Remote().Addr, body, 2, 0, false, 1, false))
	w := q.tx.w
	err := q.PostSlot(dst.RKey(), dst.Remote().Addr, body, 3, 0, false, 1, false) // 4 requests outstanding of 4
	assert.True(t, errors.Is(err, rdma.ErrSendQueueFull), "%v", err)
	assert.Equal(t, uint64(4), q.npos)
	assert.Equal(t, w, q.tx.w)

	q.drained(4)
	q.tx.w = uint64(len(q.tx.buf)) - 64 // the next frame would wrap; 100 bytes not yet written (no rewind)
	q.tx.rseen = q.tx.w - 100
	q.tx.wpos.Store(q.tx.w)
	q.tx.rpos.Store(q.tx.rseen)
	err = q.PostSlot(dst.RKey(), dst.Remote().Addr, body, 5, 0, false, 1, false)
	assert.True(t, errors.Is(err, rdma.ErrSendQueueFull), "%v", err)
	assert.Equal(t, uint64(4), q.npos)
}

// PostSlot allocates nothing.
func TestQP_PostSlot_AllocatesNothing(t *testing.T) {
	q, _, dst := postOnly(t, 2048)
	body := make([]byte, 88)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if err := q.PostSlot(dst.RKey(), dst.Remote().Addr+96, body, uint64(i), ^uint64(0), i%2 == 0, 1, i%8 == 7); err != nil {
			t.Fatal(err)
		}
		q.drained(3)
		i++
	})
	assert.Zero(t, allocs)
}
