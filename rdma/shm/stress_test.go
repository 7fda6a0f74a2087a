package shm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

// TestClose_UnderLoad_NeverFaults closes, in turn, each thing a busy
// poster touches (the target region, its source buffer, the peer QP, its
// own QP, either device) while it posts SGE WRITEs, READs and atomics and
// the peer's CQ is polled. Unmapping under a running copy would SIGSEGV the
// test binary; every post must end in a completion or a documented error.
func TestClose_UnderLoad_NeverFaults(t *testing.T) {
	rounds := 5
	if testing.Short() {
		rounds = 1
	}
	kinds := []string{"target region", "source buffer", "peer QP", "own QP", "peer device", "own device"}
	for r := range rounds {
		for _, kind := range kinds {
			t.Run(fmt.Sprintf("%s/%d", kind, r), func(t *testing.T) { closeUnderLoad(t, kind) })
		}
	}
}

func closeUnderLoad(t *testing.T, kind string) {
	da, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer da.Close()
	db, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer db.Close()
	cqa, err := da.CreateCQ(256)
	require.NoError(t, err)
	cqb, err := db.CreateCQ(256)
	require.NoError(t, err)
	qa, err := da.CreateQP(rdma.QPConfig{SendCQ: cqa, RecvCQ: cqa, SendDepth: 64})
	require.NoError(t, err)
	qb, err := db.CreateQP(rdma.QPConfig{SendCQ: cqb, RecvCQ: cqb, SendDepth: 64})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, qa.Connect(ctx, qb.LocalEndpoint()))
	require.NoError(t, qb.Connect(ctx, qa.LocalEndpoint()))
	target, err := db.RegisterMemory(1<<20, rdma.AccessRemote)
	require.NoError(t, err)
	src, err := da.RegisterMemory(1<<20, rdma.AccessLocalWrite)
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]rdma.Completion, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			cqb.Poll(buf)
		}
	})
	var posted atomic.Int64
	errc := make(chan error, 1)
	go func() {
		buf := make([]rdma.Completion, 64)
		ops := []rdma.WorkRequest{
			{Op: rdma.OpWrite, Local: rdma.LocalSGE(src, 0, 1<<19), Remote: rdma.RemoteAddr{Addr: target.Addr(), RKey: target.RKey()}},
			{Op: rdma.OpRead, Local: rdma.LocalSGE(src, 1<<19, 1<<19), Remote: rdma.RemoteAddr{Addr: target.Addr() + 1<<19, RKey: target.RKey()}},
			{Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(src, 0, 8), Remote: rdma.RemoteAddr{Addr: target.Addr(), RKey: target.RKey()}, Add: 1},
		}
		for i := 0; ; i++ {
			wr := ops[i%len(ops)]
			wr.ID = uint64(i)
			if i%4 == 0 {
				wr.Flags = rdma.FlagSignaled
			}
			switch err := qa.PostSend(&wr); {
			case err == nil:
				posted.Add(1)
			case errors.Is(err, rdma.ErrSendQueueFull):
			default:
				errc <- err
				return
			}
			n := cqa.Poll(buf)
			for _, c := range buf[:n] {
				switch c.Status {
				case rdma.StatusSuccess, rdma.StatusFlushed, rdma.StatusRemoteAccess, rdma.StatusLocalProtection:
				default:
					errc <- fmt.Errorf("completion %+v", c)
					return
				}
			}
		}
	}()
	require.Eventually(t, func() bool { return posted.Load() > 50 }, 5*time.Second, 100*time.Microsecond)
	switch kind {
	case "target region":
		require.NoError(t, target.Close())
	case "source buffer":
		require.NoError(t, src.Close())
	case "peer QP":
		require.NoError(t, qb.Close())
	case "own QP":
		require.NoError(t, qa.Close())
	case "peer device":
		require.NoError(t, db.Close())
	case "own device":
		require.NoError(t, da.Close())
	}
	// The poster goes on (into ERR, mostly) until its QP is closed.
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, qa.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, rdma.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("poster still running after Close")
	}
	close(stop)
	wg.Wait()
}
