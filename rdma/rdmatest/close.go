package rdmatest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var closeTests = []test{
	{"QP_WhilePosting_AndPeerPolling", testCloseWhileBusy},
	{"Device_WhilePostingAndPolling", testCloseDeviceWhileBusy},
	{"CQ_WhilePolling", testCloseCQWhilePolling},
	{"Region_WhileWritten", testCloseRegionWhileWritten},
}

// poller polls cq until stop closes, counting completions.
func poller(cq rdma.CompletionQueue, stop <-chan struct{}, n *atomic.Int64) {
	buf := make([]rdma.Completion, 16)
	var idle rdma.Yield
	for {
		select {
		case <-stop:
			return
		default:
		}
		k := cq.Poll(buf)
		n.Add(int64(k))
		idle.Idle(k)
	}
}

// poster posts writes to rr on qp, polling cq itself, until PostSend fails
// with something other than a full queue; it returns that error (ErrClosed
// is the expected end) or an unexpected one.
func poster(qp rdma.QueuePair, cq rdma.CompletionQueue, rr rdma.RemoteAddr, posted *atomic.Int64) error {
	buf := make([]rdma.Completion, 16)
	var idle rdma.Yield
	data := []byte("0123456789abcdef0123456789abcdef")
	for i := uint64(0); ; i++ {
		wr := rdma.WorkRequest{ID: i, Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: data, Remote: rr}
		if i%8 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		err := qp.PostSend(&wr)
		switch {
		case err == nil:
			posted.Add(1)
		case errors.Is(err, rdma.ErrSendQueueFull):
		default:
			return err
		}
		n := cq.Poll(buf)
		for _, c := range buf[:n] {
			if c.Status != rdma.StatusSuccess && c.Status != rdma.StatusFlushed && c.Status != rdma.StatusRetryExceeded {
				return fmt.Errorf("rdmatest: write completed with %s", c.Status)
			}
		}
		idle.Idle(n)
	}
}

func testCloseWhileBusy(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 32})
	stop := make(chan struct{})
	var polled, posted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { poller(x.cqB, stop, &polled) })
	errc := make(chan error, 1)
	go func() { errc <- poster(x.a, x.cqA, remote(x.target, 64), &posted) }()
	require.Eventually(t, func() bool { return posted.Load() > 100 }, opTimeout, time.Millisecond)
	require.NoError(t, x.b.Close(), "peer QP closed while its CQ is polled and it is written to")
	require.Eventually(t, func() bool { return x.a.State() == rdma.QPError }, opTimeout, time.Millisecond, "requester learns its peer is gone")
	require.NoError(t, x.a.Close(), "QP closed while another goroutine posts to it")
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, rdma.ErrClosed, "the poster ends with ErrClosed")
	case <-time.After(opTimeout):
		t.Fatal("poster still running after Close")
	}
	close(stop)
	wg.Wait()
}

func testCloseDeviceWhileBusy(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 32})
	stop := make(chan struct{})
	var polled, posted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { poller(x.cqB, stop, &polled) })
	errc := make(chan error, 1)
	go func() { errc <- poster(x.a, x.cqA, remote(x.target, 64), &posted) }()
	require.Eventually(t, func() bool { return posted.Load() > 100 }, opTimeout, time.Millisecond)
	require.NoError(t, x.devB.Close(), "target device closed while written to and polled")
	require.NoError(t, x.devA.Close(), "requester device closed while posting")
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, rdma.ErrClosed)
	case <-time.After(opTimeout):
		t.Fatal("poster still running after device Close")
	}
	close(stop)
	wg.Wait()
}

func testCloseCQWhilePolling(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	stop := make(chan struct{})
	var polled atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { poller(x.cqB, stop, &polled) })
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, x.b.Close())
	require.NoError(t, x.cqB.Close())
	require.NoError(t, x.cqB.Close(), "second Close")
	close(stop)
	wg.Wait()
	assert.Zero(t, x.cqB.Poll(make([]rdma.Completion, 4)), "a closed CQ has nothing")
}

// Closing a target region while a peer writes into it: writes before
// complete, writes after fail with StatusRemoteAccess; nothing crashes.
func testCloseRegionWhileWritten(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 32})
	mr, err := x.devB.RegisterMemory(1<<16, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	var posted atomic.Int64
	errc := make(chan error, 1)
	go func() { errc <- poster(x.a, x.cqA, remote(mr, 0), &posted) }()
	require.Eventually(t, func() bool { return posted.Load() > 100 }, opTimeout, time.Millisecond)
	require.NoError(t, mr.Close())
	require.Eventually(t, func() bool { return x.a.State() == rdma.QPError }, opTimeout, time.Millisecond,
		"a write after deregistration fails and moves the QP to ERR")
	require.NoError(t, x.a.Close())
	err = <-errc
	if !errors.Is(err, rdma.ErrClosed) {
		assert.ErrorContains(t, err, rdma.StatusRemoteAccess.String())
	}
}
