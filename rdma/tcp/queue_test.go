package tcp_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

func TestQP_PostSend_FullUntilCompletionsArePolled(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(t, openDevice(t, tcp.Config{}), 4, all)
	b := newSide(t, openDevice(t, tcp.Config{}), 4, all)
	connect(t, a, b)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
	for i := 0; i < 4; i++ {
		wr.ID = uint64(i)
		require.NoError(t, a.QP.PostSend(&wr))
	}
	// The requests complete on the wire, but their entries stay taken until
	// the completions are polled, as in verbs.
	time.Sleep(20 * time.Millisecond)
	assert.ErrorIs(t, a.QP.PostSend(&wr), rdma.ErrSendQueueFull)
	for i := 0; i < 4; i++ {
		assert.Equal(t, uint64(i), wait(t, a.CQ).ID)
	}
	require.NoError(t, a.QP.PostSend(&wr))
	assert.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
}

func TestQP_PostRecv_FullAtRecvDepth(t *testing.T) {
	d := openDevice(t, tcp.Config{})
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1, RecvDepth: 2})
	require.NoError(t, err)
	require.NoError(t, qp.PostRecv(&rdma.RecvRequest{ID: 1}))
	require.NoError(t, qp.PostRecv(&rdma.RecvRequest{ID: 2}))
	assert.ErrorIs(t, qp.PostRecv(&rdma.RecvRequest{ID: 3}), rdma.ErrRecvQueueFull)
	require.NoError(t, qp.Close())
	// Close flushes posted receives.
	assert.Equal(t, rdma.Completion{ID: 1, Status: rdma.StatusFlushed, Op: rdma.OpRecv, QPN: qp.Num()}, wait(t, cq))
	assert.Equal(t, rdma.Completion{ID: 2, Status: rdma.StatusFlushed, Op: rdma.OpRecv, QPN: qp.Num()}, wait(t, cq))
	assert.ErrorIs(t, qp.PostRecv(&rdma.RecvRequest{ID: 4}), rdma.ErrClosed)
}

func TestQP_PostSend_FullWhenCQHasNoRoom(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	da, db := openDevice(t, tcp.Config{}), openDevice(t, tcp.Config{})
	cq, err := da.CreateCQ(2)
	require.NoError(t, err)
	qp, err := da.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8})
	require.NoError(t, err)
	mr, err := da.RegisterMemory(4096, all)
	require.NoError(t, err)
	a := &side{Dev: da, CQ: cq, QP: qp, MR: mr}
	b := newSide(t, db, 8, all)
	connect(t, a, b)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(a.MR, 0, 8), Remote: remote(b.MR, 0)}
	require.NoError(t, a.QP.PostSend(&wr))
	require.NoError(t, a.QP.PostSend(&wr))
	assert.ErrorIs(t, a.QP.PostSend(&wr), rdma.ErrSendQueueFull)
	wait(t, cq)
	require.NoError(t, a.QP.PostSend(&wr))
}

func TestQP_PostSend_BeforeConnectAndAfterClose(t *testing.T) {
	d := openDevice(t, tcp.Config{})
	s := newSide(t, d, 4, rdma.AccessLocalWrite)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(s.MR, 0, 8)}
	assert.ErrorIs(t, s.QP.PostSend(&wr), rdma.ErrQPState)
	assert.ErrorIs(t, s.QP.PostSend(nil), rdma.ErrInvalidRequest)
	require.NoError(t, s.QP.Close())
	require.NoError(t, s.QP.Close())
	assert.ErrorIs(t, s.QP.PostSend(&wr), rdma.ErrClosed)
	assert.Equal(t, rdma.QPClosed, s.QP.State())
}

func TestQP_Close_LingersUntilPostedWritesLand(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(t, openDevice(t, tcp.Config{}), 512, all)
	b := newSide(t, openDevice(t, tcp.Config{}), 512, all)
	connect(t, a, b)
	const n = 500
	for i := 0; i < n; i++ {
		msg := []byte{byte(i), byte(i >> 8), 0xa5, 0x5a}
		wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: msg, Remote: remote(b.MR, i*4)}
		require.NoError(t, a.QP.PostSend(&wr))
	}
	// Unsignalled and unpolled: Close alone must let them reach the peer,
	// as a NIC would have sent them when they were posted.
	require.NoError(t, a.QP.Close())
	for i := 0; i < n; i++ {
		require.Equal(t, []byte{byte(i), byte(i >> 8), 0xa5, 0x5a}, b.MR.Bytes()[i*4:i*4+4], "write %d", i)
	}
	none(t, a.CQ)
}
