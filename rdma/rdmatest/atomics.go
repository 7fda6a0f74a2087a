package rdmatest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var atomicTests = []test{
	{"RacingQPs_FAASumExact_CASIncrementsOnce", testAtomicsRacingQPs},
}

const (
	faaOff = 0   // word the racers fetch-and-add 1 to
	casOff = 128 // word the racers increment by compare-and-swap
)

func atomicRounds() int {
	if testing.Short() {
		return 100
	}
	return 500
}

// atomicRacer does n FAA(+1) on faaOff and n CAS increments on casOff of rr
// through qp, one request at a time, and returns the values its CASes won.
// Safe in any goroutine.
func atomicRacer(qp rdma.QueuePair, cq rdma.CompletionQueue, local rdma.MemoryRegion, rr rdma.RemoteRegion, n int) ([]uint64, error) {
	res := local.Bytes()[:8]
	one := func(wr *rdma.WorkRequest) (uint64, error) {
		wr.Flags = rdma.FlagSignaled
		wr.Local = rdma.LocalSGE(local, 0, 8)
		if err := qp.PostSend(wr); err != nil {
			return 0, err
		}
		cs, err := pollN(cq, 1, opTimeout)
		if err != nil {
			return 0, err
		}
		if cs[0].Status != rdma.StatusSuccess {
			return 0, fmt.Errorf("rdmatest: %s completed with %s", wr.Op, cs[0].Status)
		}
		return u64(res), nil
	}
	faa := rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Remote: rdma.RemoteAddr{Addr: rr.Addr + faaOff, RKey: rr.RKey}, Add: 1}
	cas := rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Remote: rdma.RemoteAddr{Addr: rr.Addr + casOff, RKey: rr.RKey}}
	won := make([]uint64, 0, n)
	guess := uint64(0)
	for range n {
		if _, err := one(&faa); err != nil {
			return won, err
		}
		for {
			cas.Compare, cas.Swap = guess, guess+1
			orig, err := one(&cas)
			if err != nil {
				return won, err
			}
			if orig == guess {
				won = append(won, guess)
				guess++
				break
			}
			guess = orig
		}
	}
	return won, nil
}

// checkWon asserts the CAS winners are exactly 0..total-1, each once.
func checkWon(t *testing.T, won []uint64, total int) {
	t.Helper()
	slices.Sort(won)
	require.Len(t, won, total, "CAS wins")
	for i, v := range won {
		if v != uint64(i) {
			t.Fatalf("CAS increments not each won exactly once: sorted wins[%d] = %d, want %d", i, v, i)
		}
	}
}

func testAtomicsRacingQPs(t *testing.T, p Provider) {
	const racers = 4
	n := atomicRounds()
	devA, devB := openDevice(t, p), openDevice(t, p)
	target, err := devB.RegisterMemory(4096, rdma.AccessRemote|rdma.AccessLocalWrite)
	require.NoError(t, err)
	type racer struct {
		qp    rdma.QueuePair
		cq    rdma.CompletionQueue
		local rdma.MemoryRegion
	}
	rs := make([]racer, racers)
	for i := range rs {
		cqA, err := devA.CreateCQ(16)
		require.NoError(t, err)
		cqB, err := devB.CreateCQ(16)
		require.NoError(t, err)
		qa, err := devA.CreateQP(rdma.QPConfig{SendCQ: cqA, RecvCQ: cqA, SendDepth: 4})
		require.NoError(t, err)
		qb, err := devB.CreateQP(rdma.QPConfig{SendCQ: cqB, RecvCQ: cqB, SendDepth: 4})
		require.NoError(t, err)
		connect(t, qa, qb)
		local, err := devA.RegisterMemory(4096, rdma.AccessLocalWrite)
		require.NoError(t, err)
		rs[i] = racer{qa, cqA, local}
	}
	// Where the device's atomics are atomic against the CPU's, the owner
	// races too, with CPU atomics on the same words.
	cpu := devB.Caps().Atomic == rdma.AtomicGlobal
	var wg sync.WaitGroup
	wons := make([][]uint64, racers+1)
	errs := make([]error, racers+1)
	for i, r := range rs {
		wg.Go(func() { wons[i], errs[i] = atomicRacer(r.qp, r.cq, r.local, target.Remote(), n) })
	}
	if cpu {
		wg.Go(func() {
			f := (*uint64)(unsafe.Pointer(&target.Bytes()[faaOff]))
			c := (*uint64)(unsafe.Pointer(&target.Bytes()[casOff]))
			for range n {
				atomic.AddUint64(f, 1)
				for {
					v := atomic.LoadUint64(c)
					if atomic.CompareAndSwapUint64(c, v, v+1) {
						wons[racers] = append(wons[racers], v)
						break
					}
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "racer %d", i)
	}
	total := racers * n
	if cpu {
		total += n
	}
	assert.Equal(t, uint64(total), u64(target.Bytes()[faaOff:]), "sum of fetch-and-adds")
	assert.Equal(t, uint64(total), u64(target.Bytes()[casOff:]), "CAS counter")
	checkWon(t, slices.Concat(wons...), total)
}
