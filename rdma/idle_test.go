package rdma_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func TestParseIdle_NamesAndErrors(t *testing.T) {
	for _, name := range []string{"adaptive", "spin", "yield", "backoff", ""} {
		s, err := rdma.ParseIdle(name)
		require.NoError(t, err, name)
		s.Idle(0)
		s.Idle(1)
	}
	for _, name := range []string{"", "adaptive", " Adaptive "} {
		s, err := rdma.ParseIdle(name)
		require.NoError(t, err)
		assert.IsType(t, &rdma.Adaptive{}, s, "%q is the default, adaptive", name)
	}
	_, err := rdma.ParseIdle("nap")
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `"nap"`)
}

func TestBackoff_ParksAfterSpinsAndYields(t *testing.T) {
	b := &rdma.Backoff{MaxSpins: 2, MaxYields: 2, MinPark: time.Millisecond, MaxPark: 2 * time.Millisecond}
	start := time.Now()
	for i := 0; i < 4; i++ {
		b.Idle(0) // spins and yields: no sleep
	}
	b.Idle(0) // first park
	// Sleeping at least MinPark is a lower bound the runtime guarantees, not a
	// timing assertion about speed.
	assert.GreaterOrEqual(t, time.Since(start), time.Millisecond)
}

func TestAdaptive_ParksOnlyAfterIdling(t *testing.T) {
	a := &rdma.Adaptive{SpinFor: time.Millisecond, YieldFor: time.Millisecond, MinPark: time.Microsecond, MaxPark: 50 * time.Microsecond}
	// Work between idle calls keeps it spinning: never a park.
	for i := 0; i < 100_000; i++ {
		a.Idle(0)
		a.Idle(1)
	}
	require.Zero(t, a.Parks(), "parked while work kept coming")
	// Idle calls only: it parks once SpinFor+YieldFor have passed; bounded
	// by a deadline, not timed.
	deadline := time.Now().Add(10 * time.Second)
	for a.Parks() < 3 && time.Now().Before(deadline) {
		a.Idle(0)
	}
	require.GreaterOrEqual(t, a.Parks(), uint64(3), "an idle loop never parked")
	// Work resets it: the next idle calls spin again (the clock is not even
	// read before the 64th, so none of these can park).
	a.Idle(1)
	n := a.Parks()
	for i := 0; i < 63; i++ {
		a.Idle(0)
	}
	assert.Equal(t, n, a.Parks(), "parked right after work")
	a.Reset()
	for i := 0; i < 63; i++ {
		a.Idle(0)
	}
	assert.Equal(t, n, a.Parks(), "parked right after Reset")
}

func TestAdaptive_IdleAllocatesNothing(t *testing.T) {
	a := rdma.NewAdaptive()
	allocs := testing.AllocsPerRun(10_000, func() {
		a.Idle(0)
		a.Idle(1)
	})
	assert.Zero(t, allocs)
}

// BenchmarkAdaptive_Work is what the strategy costs a poll loop that keeps
// finding work (its message path): one compare, then an idle call and a
// reset every 64th poll. Idle polls cost what they give away by design
// (a yield every 64 spins), so they have no benchmark of their own.
func BenchmarkAdaptive_Work(b *testing.B) {
	a := rdma.NewAdaptive()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i&63 == 0 {
			a.Idle(0)
		}
		a.Idle(1)
	}
}
