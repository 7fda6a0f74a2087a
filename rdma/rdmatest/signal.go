package rdmatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var signalTests = []test{
	{"Selective_OnlySignaledComplete", testSelective},
	{"SignalAll_EveryRequestCompletes", testSignalAll},
	{"SendQueueFull_Refused_UntilPolled", testSendQueueFull},
	{"Unsignaled_HoldSendQueue_UntilLaterCompletionPolled", testUnsignaledHoldSQ},
}

func inlineWrite(x *pair, id uint64, off int, flags rdma.SendFlags) *rdma.WorkRequest {
	return &rdma.WorkRequest{ID: id, Op: rdma.OpWrite, Flags: flags | rdma.FlagInline, Inline: []byte{byte(id)}, Remote: remote(x.target, off)}
}

func testSelective(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	for i := range 3 {
		require.NoError(t, x.a.PostSend(inlineWrite(x, uint64(i+1), i, 0)))
	}
	require.NoError(t, x.a.PostSend(inlineWrite(x, 4, 3, rdma.FlagSignaled)))
	c := waitN(t, x.cqA, 1)[0]
	assert.Equal(t, uint64(4), c.ID)
	assert.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, []byte{1, 2, 3, 4}, x.target.Bytes()[:4], "unsignalled requests ran, in order")
	expectNone(t, x.cqA, 30*time.Millisecond)
}

func testSignalAll(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{signalAll: true})
	for i := range 3 {
		require.NoError(t, x.a.PostSend(inlineWrite(x, uint64(i+1), i, 0)))
	}
	cs := waitN(t, x.cqA, 3)
	for i, c := range cs {
		assert.Equal(t, uint64(i+1), c.ID, "completions in post order")
		assert.Equal(t, rdma.StatusSuccess, c.Status)
	}
}

func testSendQueueFull(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 4})
	for i := range 4 {
		require.NoError(t, x.a.PostSend(inlineWrite(x, uint64(i+1), i, rdma.FlagSignaled)))
	}
	before := x.target.Bytes()[4]
	assert.ErrorIs(t, x.a.PostSend(inlineWrite(x, 5, 4, rdma.FlagSignaled)), rdma.ErrSendQueueFull)
	waitN(t, x.cqA, 4)
	assert.Equal(t, before, x.target.Bytes()[4], "the refused request did nothing")
	assert.Equal(t, rdma.QPReadyToSend, x.a.State(), "a full queue is not an error state")
	require.NoError(t, x.a.PostSend(inlineWrite(x, 6, 5, rdma.FlagSignaled)))
	assert.Equal(t, uint64(6), waitN(t, x.cqA, 1)[0].ID)
}

// As verbs: an unsignalled request keeps its send-queue entry until a
// completion of a later request on the QP is polled.
func testUnsignaledHoldSQ(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 4})
	for i := range 3 {
		require.NoError(t, x.a.PostSend(inlineWrite(x, uint64(i+1), i, 0)))
	}
	require.NoError(t, x.a.PostSend(inlineWrite(x, 4, 3, rdma.FlagSignaled)))
	assert.ErrorIs(t, x.a.PostSend(inlineWrite(x, 5, 4, 0)), rdma.ErrSendQueueFull)
	waitN(t, x.cqA, 1)
	for i := range 3 {
		require.NoError(t, x.a.PostSend(inlineWrite(x, uint64(10+i), 10+i, 0)), "entry %d freed by the polled completion", i)
	}
	require.NoError(t, x.a.PostSend(inlineWrite(x, 13, 13, rdma.FlagSignaled)))
	assert.Equal(t, uint64(13), waitN(t, x.cqA, 1)[0].ID)
}
