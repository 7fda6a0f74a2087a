package tcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// A stream whose flusher keeps up stays at the start of the send buffer
// (the cursor rewinds once everything was written), and what it sends
// lands intact, across more bytes than the buffer holds.
func TestQP_SendBuffer_RewindsWhenDrainedAndLosesNothing(t *testing.T) {
	a, b := pair(t, tcp.Config{MaxMsgSize: 64 << 10}) // a 256 KiB send buffer
	q := a.QP.(*tcp.QP)
	src, dst := a.MR.Bytes(), b.MR.Bytes()
	const size = 4000
	maxIndex := uint64(0)
	for round := 0; round < 200; round++ { // 200 × 16 × ~4 KiB = 12.8 MiB
		// The flusher stores its position after its write returns, which
		// may be after the peer's answer: wait for it, so the first post
		// of the round finds the buffer empty.
		waitFor(t, "the flusher's position", q.SendDrained)
		for i := 0; i < 16; i++ {
			off := i * size
			for j := 0; j < size; j++ {
				src[off+j] = byte(round + i + j)
			}
			wr := rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, off, size), Remote: remote(b.MR, off)}
			if i == 15 {
				wr.Flags = rdma.FlagSignaled
			}
			require.NoError(t, a.QP.PostSend(&wr))
			maxIndex = max(maxIndex, q.SendIndex())
		}
		c := wait(t, a.CQ)
		require.Equal(t, rdma.StatusSuccess, c.Status)
		require.Zero(t, q.Outstanding())
		require.Equal(t, src[:16*size], dst[:16*size], "round %d", round)
	}
	assert.Less(t, maxIndex, uint64(128<<10+16*(size+48)), "the cursor came back to the start")
}
