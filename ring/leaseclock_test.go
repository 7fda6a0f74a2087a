package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/tsc"
)

// The TSC deadline never admits a claim past the lease end: once the
// monotonic clock has reached the end, the TSC is at or past its deadline
// (read after the clock, so a preemption between the reads only moves the
// TSC further).
func TestLeaseClock_TSCDeadlineIsNeverLate(t *testing.T) {
	if !tsc.Trusted {
		t.Skip("the kernel's clocksource is not the TSC here: every claim reads the clock, nothing to check")
	}
	tscObserve(tsc.Read(), monoNs())
	time.Sleep(2 * tscCalMin * time.Nanosecond)
	tscObserve(tsc.Read(), monoNs())
	for range 5 {
		ts, now := tsc.Read(), monoNs()
		end := now + int64(30*time.Millisecond)
		d := tscDeadline(ts, now, end)
		require.NotZero(t, d, "the TSC rate is known after two readings 40 ms apart")
		for {
			m := monoNs()
			c := tsc.Read()
			if m >= end {
				require.GreaterOrEqual(t, c, d, "the clock is past the lease end but the TSC is not past its deadline")
				break
			}
		}
	}
}

// A writer's lease end holds on the fast path too: claims are refused once
// it has passed, with or without a known TSC rate.
func TestLeaseClock_ClaimableRefusesAfterTheEnd(t *testing.T) {
	w := &Writer{}
	w.fence.Store(^uint64(0))
	w.SetLeaseEnd(time.Now().Add(20 * time.Millisecond))
	require.True(t, w.claimable(1, 1), "before the lease end")
	time.Sleep(30 * time.Millisecond)
	require.False(t, w.claimable(1, 1), "after the lease end")
	w.SetLeaseEnd(time.Time{})
	require.True(t, w.claimable(1, 1), "no lease end")
}

// A writer whose lease end was set before the TSC rate was known (a fresh
// process's first lease: the next renewal comes seconds later) learns its
// TSC deadline from its own claims' clock readings, and still refuses a
// claim past a later, earlier end.
func TestLeaseClock_UnknownRate_DeadlineLearntFromClaims(t *testing.T) {
	if !tsc.Trusted {
		t.Skip("the kernel's clocksource is not the TSC here: every claim reads the clock, nothing to learn")
	}
	tscCal.mu.Lock()
	tscCal.tsc0, tscCal.n0 = 0, 0
	tscCal.perNs.Store(0) // at worst, other tests' claims read the clock for a while
	tscCal.mu.Unlock()
	w := &Writer{}
	w.fence.Store(^uint64(0))
	w.SetLeaseEnd(time.Now().Add(time.Hour))
	require.Zero(t, w.leaseTSC.Load(), "one reading: no rate, no TSC deadline")
	end := w.lease.Load()
	for deadline := time.Now().Add(10 * time.Second); w.leaseTSC.Load() == 0; time.Sleep(time.Millisecond) {
		require.True(t, w.claimable(1, 1), "before the lease end")
		require.True(t, time.Now().Before(deadline), "no TSC deadline learnt from 10 s of claims")
	}
	d := w.leaseTSC.Load()
	require.Equal(t, end, w.lease.Load())
	require.Greater(t, tscDeadline(tsc.Read(), monoNs(), end), d, "a deadline taken later is later (the learnt one is not past the end)")
	w.SetLeaseEnd(time.Now().Add(-time.Millisecond))
	require.False(t, w.claimable(1, 1), "an end in the past refuses, learnt deadline or not")
}

func BenchmarkClaimable_LeaseSet(b *testing.B) {
	w := &Writer{}
	w.fence.Store(^uint64(0))
	tscObserve(tsc.Read(), monoNs())
	time.Sleep(2 * tscCalMin * time.Nanosecond)
	w.SetLeaseEnd(time.Now().Add(time.Hour))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !w.claimable(uint64(i)+1, 1) {
			b.Fatal("refused")
		}
	}
}

var clockSink int64

func BenchmarkClock(b *testing.B) {
	b.Run("rdtsc", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			clockSink += tsc.Read()
		}
	})
	b.Run("mono", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			clockSink += monoNs()
		}
	})
}
