package rdma_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// A park sleeps raw (a nanosleep the runtime does not see, holding its P)
// only while another P stays free: with GOMAXPROCS 1 never, with 2 one
// sleeper at a time however many park at once, with 3 two; and never while
// goroutines wait for a P (two spin, with GOMAXPROCS 2). (A raw sleep may end early: a
// signal, such as the runtime's preemption, cuts it short, so no test here
// bounds how long one lasts.)
func TestOSSleeper_RawOnlyWhileAnotherPIsFree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs, sleepers int
		busy            int // goroutines that spin meanwhile
		wantRaw         bool
		wantMost        int32
	}{
		{procs: 1, sleepers: 1},
		{procs: 1, sleepers: 3},
		{procs: 2, sleepers: 1, busy: 2},
		{procs: 2, sleepers: 1, wantRaw: true, wantMost: 1},
		{procs: 2, sleepers: 4, wantRaw: true, wantMost: 1},
		{procs: 3, sleepers: 4, wantRaw: true, wantMost: 2},
	} {
		runtime.GOMAXPROCS(tc.procs)
		rdma.ResetRawSleepersMax()
		var stop atomic.Bool
		var spin sync.WaitGroup
		for range tc.busy {
			spin.Go(func() {
				for !stop.Load() {
				}
			})
		}
		n0, _ := rdma.RawSleeps()
		var wg sync.WaitGroup
		for range tc.sleepers {
			wg.Go(func() {
				var o rdma.OSSleeper
				for range 20 {
					o.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		stop.Store(true)
		spin.Wait()
		n1, most := rdma.RawSleeps()
		assert.Equal(t, tc.wantRaw, n1 > n0, "GOMAXPROCS %d, %d sleepers, busy %d: raw sleeps %d", tc.procs, tc.sleepers, tc.busy, n1-n0)
		if tc.wantMost == 0 {
			assert.Zero(t, most, "GOMAXPROCS %d, busy %d: raw sleepers at once", tc.procs, tc.busy)
		} else {
			require.LessOrEqual(t, most, tc.wantMost, "GOMAXPROCS %d: raw sleepers at once", tc.procs)
			assert.Positive(t, most)
		}
	}
}

// A park allocates nothing (its runtime/metrics samples are the
// sleeper's own).
func TestOSSleeper_AllocatesNothing(t *testing.T) {
	var o rdma.OSSleeper
	assert.Zero(t, testing.AllocsPerRun(20, func() { o.Sleep(time.Microsecond) }))
}
