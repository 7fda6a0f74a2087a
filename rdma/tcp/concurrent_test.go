package tcp_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// Several goroutines posting on one QP are serialised, not corrupted: every
// FETCH_AND_ADD lands exactly once and completes exactly once.
func TestQP_PostSend_ConcurrentPostersSerialised(t *testing.T) {
	a, b := pair(t, tcp.Config{})
	const posters, each = 4, 200
	var wg sync.WaitGroup
	var done atomic.Int64
	pollErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() { // the one poller
		var cs [32]rdma.Completion
		var idle rdma.Yield
		for {
			select {
			case <-stop:
				pollErr <- nil
				return
			default:
			}
			n := a.CQ.Poll(cs[:])
			for _, c := range cs[:n] {
				if c.Status != rdma.StatusSuccess {
					pollErr <- errors.New(c.Status.String())
					return
				}
			}
			done.Add(int64(n))
			idle.Idle(n)
		}
	}()
	errs := make([]error, posters)
	for p := 0; p < posters; p++ {
		wg.Go(func() {
			wr := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Add: 1,
				Local: rdma.LocalSGE(a.MR, 64+8*p, 8), Remote: remote(b.MR, 0)}
			for i := 0; i < each; i++ {
				wr.ID = uint64(p*each + i)
				for {
					err := a.QP.PostSend(&wr)
					if err == nil {
						break
					}
					if !errors.Is(err, rdma.ErrSendQueueFull) {
						errs[p] = err
						return
					}
					time.Sleep(10 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	waitFor(t, "every completion", func() bool { return done.Load() == posters*each })
	close(stop)
	require.NoError(t, <-pollErr)
	assert.Equal(t, uint64(posters*each), atomic.LoadUint64(word64(b.MR.Bytes())))
}
