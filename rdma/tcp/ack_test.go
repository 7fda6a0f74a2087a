package tcp_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// Unsignalled WRITEs are acknowledged in bulk, but never left unanswered:
// a tail that nobody polls for is answered when the responder goes idle
// (else the requester's watchdog, its send queue and its Close linger
// would wait on it), with and without the responder's spin.
func TestQP_UnsignalledTail_AnsweredWhenResponderIdles(t *testing.T) {
	for _, spins := range []int{0, 200} {
		a, b := pair(t, tcp.Config{ReadSpins: spins})
		wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
		for i := 0; i < 3; i++ {
			wr.Remote = remote(b.MR, 8*i)
			require.NoError(t, a.QP.PostSend(&wr))
		}
		q := a.QP.(*tcp.QP)
		waitFor(t, "the unsignalled tail's ACK", func() bool { return q.Outstanding() == 0 })
		assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, b.MR.Bytes()[16:24], "ReadSpins %d", spins)
		none(t, a.CQ)
		assert.Equal(t, rdma.QPReadyToSend, a.QP.State())
	}
}

// A signalled WRITE behind unsignalled ones completes (its ACK answers
// them all), and only it makes a completion.
func TestQP_SignalledWrite_AnswersTheUnsignalledBeforeIt(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte{9}}
	for i := 0; i < 60; i++ { // within the send queue (64)
		wr.ID, wr.Remote = uint64(i), remote(b.MR, i%64)
		if i == 59 {
			wr.Flags |= rdma.FlagSignaled
		}
		require.NoError(t, a.QP.PostSend(&wr))
	}
	c := wait(t, a.CQ)
	assert.Equal(t, uint64(59), c.ID)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Zero(t, a.QP.(*tcp.QP).Outstanding())
	none(t, a.CQ)
}

// Over many laps of the send queue, with signalled WRITEs, unsignalled
// ones and READs mixed, exactly the signalled WRITEs and the READs
// complete, in post order, and each READ brings back what was written
// before it: the reaper walks the requests that make completions (QP
// marks), counting the unsignalled between them.
func TestQP_MixedStream_CompletesSignalledAndReadsInOrderOverLaps(t *testing.T) {
	a, b := pair(t, tcp.Config{}) // send queues of 64
	var want []uint64
	var cs [64]rdma.Completion
	var idle rdma.Yield
	got := 0
	poll := func() {
		n := a.CQ.Poll(cs[:])
		for _, c := range cs[:n] {
			require.Equal(t, rdma.StatusSuccess, c.Status, "completion %d", c.ID)
			require.Less(t, got, len(want), "completion %d that was not asked for", c.ID)
			require.Equal(t, want[got], c.ID, "completion %d", got)
			got++
		}
		idle.Idle(n)
	}
	for i := uint64(1); i <= 640; i++ {
		binary.LittleEndian.PutUint64(a.MR.Bytes()[8*(i%32):], i)
		wr := rdma.WorkRequest{ID: i, Op: rdma.OpWrite, Local: rdma.LocalSGE(a.MR, int(8*(i%32)), 8), Remote: remote(b.MR, int(8*(i%32)))}
		switch {
		case i%50 == 0:
			wr = rdma.WorkRequest{ID: i, Op: rdma.OpRead, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 512, 8), Remote: remote(b.MR, int(8*((i-1)%32)))}
		case i%7 == 0:
			wr.Flags = rdma.FlagSignaled
		}
		for {
			err := a.QP.PostSend(&wr)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, rdma.ErrSendQueueFull)
			poll()
		}
		if wr.Flags&rdma.FlagSignaled != 0 {
			want = append(want, i)
		}
		if wr.Op == rdma.OpRead {
			for got < len(want) {
				poll()
			}
			assert.Equal(t, i-1, binary.LittleEndian.Uint64(a.MR.Bytes()[512:]), "READ %d", i)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for got < len(want) && time.Now().Before(deadline) {
		poll()
	}
	assert.Equal(t, len(want), got)
	none(t, a.CQ)
	waitFor(t, "every request answered", func() bool { return a.QP.(*tcp.QP).Outstanding() == 0 })
}
