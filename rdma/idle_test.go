package rdma_test

import (
	"runtime"
	"sync/atomic"
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

// fakeClock is a test's time: every reading advances it by step, and a
// sleep by the time slept, which it records. No test below waits for real
// time: what they check is counted.
type fakeClock struct {
	t, step time.Duration
	sleeps  []time.Duration
}

func (c *fakeClock) now() time.Duration { c.t += c.step; return c.t }

func (c *fakeClock) sleep(d time.Duration) { c.t += d; c.sleeps = append(c.sleeps, d) }

func newFakeAdaptive() (*rdma.Adaptive, *fakeClock) {
	a := rdma.NewAdaptive()
	c := &fakeClock{t: time.Second, step: time.Microsecond}
	rdma.SetAdaptiveClock(a, c.now, c.sleep)
	return a, c
}

func TestAdaptive_ParksAfterTheWindow_ThenDeeper(t *testing.T) {
	a, c := newFakeAdaptive()
	a.Idle(1)
	a.Idle(0) // the span starts: one clock reading
	start := c.t
	calls := 0
	for a.Parks() == 0 && calls < 1_000_000 {
		a.Idle(0)
		calls++
		if a.Parks() == 0 {
			require.Less(t, c.t-start, rdma.DefaultSpinFor+rdma.DefaultYieldFor+2*time.Microsecond,
				"still not parked %v after the span began", c.t-start)
		}
	}
	require.EqualValues(t, 1, a.Parks(), "never parked")
	assert.GreaterOrEqual(t, c.t-start-rdma.DefaultMinPark, rdma.DefaultSpinFor+rdma.DefaultYieldFor, "parked before spin and yield were over")
	// 50 spin-phase clock readings, each after 64 calls, then one per call.
	assert.Greater(t, calls, 64*int(rdma.DefaultSpinFor/time.Microsecond)-64)

	// Parks double from MinPark to MaxPark; after DeepAfter without work,
	// every park is DeepPark.
	for c.t-start < rdma.DefaultDeepAfter+10*rdma.DefaultDeepPark {
		a.Idle(0)
	}
	require.Equal(t, rdma.DefaultMinPark, c.sleeps[0])
	for i := 1; i < len(c.sleeps); i++ {
		prev, d := c.sleeps[i-1], c.sleeps[i]
		switch {
		case prev < rdma.DefaultMaxPark:
			require.Equal(t, min(2*prev, rdma.DefaultMaxPark), d, "park %d", i)
		case d != rdma.DefaultDeepPark:
			require.Equal(t, rdma.DefaultMaxPark, d, "park %d", i)
		}
	}
	last := c.sleeps[len(c.sleeps)-10:]
	for _, d := range last {
		assert.Equal(t, rdma.DefaultDeepPark, d, "parks after DeepAfter")
	}
	assert.Equal(t, 3, rdma.AdaptivePhase(a))

	// Work brings it back to spinning: no park for the next spin window.
	n := a.Parks()
	a.Idle(1)
	for i := 0; i < 64*int(rdma.DefaultSpinFor/time.Microsecond)/2; i++ {
		a.Idle(0)
	}
	assert.Equal(t, n, a.Parks(), "parked right after work")
	assert.Equal(t, 0, rdma.AdaptivePhase(a))
}

// idleFor calls Idle(0) until d of fake time has passed since the span
// began (the clock advances only when the strategy reads it), then ends
// the span with work.
func idleFor(a *rdma.Adaptive, c *fakeClock, d time.Duration) (phaseAt func(time.Duration) int) {
	a.Idle(0)
	start := c.t
	phases := map[time.Duration]int{}
	for c.t-start < d {
		a.Idle(0)
		phases[(c.t-start)/(10*time.Microsecond)] = rdma.AdaptivePhase(a)
	}
	a.Idle(1)
	return func(at time.Duration) int { return phases[at/(10*time.Microsecond)] }
}

func TestAdaptive_SpinWindowFollowsTheGapBetweenWorks(t *testing.T) {
	a, c := newFakeAdaptive()
	a.Idle(1)
	// A feed with 300 µs between ticks: after a few ticks the strategy
	// spins from tick to tick (window twice the gap), where the fixed
	// SpinFor would have left the spin phase at 50 µs.
	var phaseAt func(time.Duration) int
	for i := 0; i < 20; i++ {
		phaseAt = idleFor(a, c, 300*time.Microsecond)
	}
	a.Idle(0)
	w := rdma.AdaptiveWindow(a)
	assert.InDelta(t, float64(600*time.Microsecond), float64(w), float64(50*time.Microsecond), "window %v", w)
	assert.Equal(t, 0, phaseAt(280*time.Microsecond), "left the spin phase within the gap")
	assert.Zero(t, a.Parks())
	a.Idle(1)

	// Ticks close together again: the window shrinks back to SpinFor.
	for i := 0; i < 40; i++ {
		idleFor(a, c, 5*time.Microsecond)
	}
	a.Idle(0)
	assert.Equal(t, rdma.DefaultSpinFor, rdma.AdaptiveWindow(a))
	a.Idle(1)

	// A long silence counts as at most SpinMax: the window never exceeds it.
	idleFor(a, c, time.Minute)
	a.Idle(0)
	assert.LessOrEqual(t, rdma.AdaptiveWindow(a), rdma.DefaultSpinMax)
	assert.Greater(t, rdma.AdaptiveWindow(a), rdma.DefaultSpinFor)
}

func TestAdaptive_IdleAllocatesNothing(t *testing.T) {
	a := rdma.NewAdaptive()
	allocs := testing.AllocsPerRun(10_000, func() {
		a.Idle(0)
		a.Idle(1)
	})
	assert.Zero(t, allocs)
}

// BenchmarkAdaptive_Spin is an idle call in the spin phase (the window
// never ends here): a compare and a count, and per 64 calls a clock read,
// runtime.Gosched and sched_yield; no allocation.
func BenchmarkAdaptive_Spin(b *testing.B) {
	a := &rdma.Adaptive{SpinFor: time.Hour, SpinMax: time.Hour, YieldFor: time.Hour, MinPark: time.Hour, MaxPark: time.Hour}
	a.Idle(1)
	b.ReportAllocs()
	for b.Loop() {
		a.Idle(0)
	}
	if rdma.AdaptivePhase(a) != 0 || a.Parks() != 0 {
		b.Fatal("left the spin phase")
	}
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

// Yield mostly calls sched_yield, which cannot run a goroutine queued on
// this P; its occasional Gosched must. On one P, a goroutine started by a
// loop idling with Yield runs within 2000 idle calls (about one in 64
// Goscheds, with no tcp queue pair open: more than 2000 in a row without
// one has probability (63/64)^2000, about 2e-14; without any Gosched it
// would wait for the runtime's preemption, 10 ms, thousands of
// sched_yields on an idle machine, and more on a loaded one).
func TestYield_LetsAGoroutineOnTheSamePRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for round := 0; round < 20; round++ {
		var ran atomic.Bool
		go ran.Store(true)
		calls := 0
		for !ran.Load() && calls < 1_000_000 {
			rdma.Yield{}.Idle(0)
			calls++
		}
		require.True(t, ran.Load(), "round %d: the goroutine never ran", round)
		assert.Less(t, calls, 2000, "round %d: idle calls before the goroutine ran", round)
	}
}
