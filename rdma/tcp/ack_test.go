package tcp_test

import (
	"testing"

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
