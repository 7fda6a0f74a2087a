package rdma_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// osSleep sleeps raw (a nanosleep the runtime does not see, holding its P)
// only while another P stays free: with GOMAXPROCS 1 never, with 2 one
// sleeper at a time however many park at once, with 3 two. (A raw sleep
// may end early: a signal, such as the runtime's preemption, cuts it
// short, so no test here bounds how long one lasts.)
func TestOSSleep_RawOnlyWhileAnotherPIsFree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs, sleepers int
		wantRaw         bool
		wantMost        int32
	}{
		{procs: 1, sleepers: 1, wantRaw: false, wantMost: 0},
		{procs: 1, sleepers: 3, wantRaw: false, wantMost: 0},
		{procs: 2, sleepers: 1, wantRaw: true, wantMost: 1},
		{procs: 2, sleepers: 4, wantRaw: true, wantMost: 1},
		{procs: 3, sleepers: 4, wantRaw: true, wantMost: 2},
	} {
		runtime.GOMAXPROCS(tc.procs)
		rdma.ResetRawSleepersMax()
		n0, _ := rdma.RawSleeps()
		var wg sync.WaitGroup
		for range tc.sleepers {
			wg.Go(func() {
				for range 20 {
					rdma.OSSleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		n1, most := rdma.RawSleeps()
		assert.Equal(t, tc.wantRaw, n1 > n0, "GOMAXPROCS %d, %d sleepers: raw sleeps %d", tc.procs, tc.sleepers, n1-n0)
		if tc.wantMost == 0 {
			assert.Zero(t, most, "GOMAXPROCS %d: raw sleepers at once", tc.procs)
		} else {
			require.LessOrEqual(t, most, tc.wantMost, "GOMAXPROCS %d: raw sleepers at once", tc.procs)
			assert.Positive(t, most)
		}
	}
}
