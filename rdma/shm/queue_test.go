package shm

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// FuzzDrain: a peer writes the receive queue's slots (kind, length,
// immediate, sequence) in memory we share with it, so drain decodes bytes
// that crossed a process. Whatever it finds, it must not panic, complete
// only posted receives, in order, with a status from the documented set,
// and write nothing outside the receive buffers.
func FuzzDrain(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 1})
	f.Add([]byte{2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 1, 3, 0, 0, 0, 200, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Open(Config{MaxSend: 64})
		require.NoError(t, err)
		defer d.Close()
		cq, err := d.CreateCQ(16)
		require.NoError(t, err)
		qpi, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1, RecvDepth: 4})
		require.NoError(t, err)
		q := qpi.(*QP)
		mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
		require.NoError(t, err)
		for i := range 4 {
			require.NoError(t, q.PostRecv(&rdma.RecvRequest{ID: uint64(i), Local: rdma.LocalSGE(mr, i*128, 32)}))
		}
		before := bytes.Clone(mr.Bytes())
		v := q.in.view
		// 13 bytes per message: kind, len, imm (u32 each), and whether it is
		// published (seq = i+1) or has a stray sequence.
		for i := uint64(0); i < 4 && len(in) >= 13; i++ {
			s := v.slotAt(i)
			copy(v.mem[s+slotOffKind:], in[0:12])
			copy(v.payload(i), bytes.Repeat([]byte{0xee}, v.maxSend))
			seq := i + 1
			if in[12]&1 == 0 {
				seq = uint64(in[12]) << 8
			}
			atomic.StoreUint64(v.seq(i), seq)
			in = in[13:]
		}
		buf := make([]rdma.Completion, 8)
		n := q.drain(buf)
		require.LessOrEqual(t, n, 4)
		for i, c := range buf[:n] {
			assert.Equal(t, uint64(i), c.ID, "in post order")
			assert.Contains(t, []rdma.Status{rdma.StatusSuccess, rdma.StatusLocalLength, rdma.StatusRemoteOp}, c.Status)
			if c.Status == rdma.StatusSuccess && c.Op == rdma.OpRecv {
				assert.LessOrEqual(t, c.Bytes, uint32(32))
			}
		}
		after := mr.Bytes()
		for i := range 4 {
			lo := i*128 + 32
			assert.Equal(t, before[lo:lo+96], after[lo:lo+96], "nothing written past receive buffer %d", i)
		}
	})
}

func TestDrain_ErrQP_FlushesUnarrived(t *testing.T) {
	d, err := Open(Config{})
	require.NoError(t, err)
	defer d.Close()
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	qpi, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1, RecvDepth: 4})
	require.NoError(t, err)
	q := qpi.(*QP)
	require.NoError(t, q.PostRecv(&rdma.RecvRequest{ID: 1}))
	require.NoError(t, q.PostRecv(&rdma.RecvRequest{ID: 2}))
	q.in.view.publish(0, kindWriteImm, 8, 77)
	buf := make([]rdma.Completion, 4)
	require.Equal(t, 1, cq.Poll(buf), "the arrived one")
	assert.Equal(t, rdma.Completion{ID: 1, Op: rdma.OpRecvImm, QPN: q.num, Bytes: 8, Imm: 77}, buf[0])
	assert.Zero(t, cq.Poll(buf), "the other waits")
	q.toError()
	require.Equal(t, 1, cq.Poll(buf))
	assert.Equal(t, rdma.StatusFlushed, buf[0].Status)
	assert.Equal(t, uint64(2), buf[0].ID)
}
