package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The TSC deadline never admits a claim past the lease end: once the
// monotonic clock has reached the end, the TSC is at or past its deadline
// (read after the clock, so a preemption between the reads only moves the
// TSC further).
func TestLeaseClock_TSCDeadlineIsNeverLate(t *testing.T) {
	if !tscTrusted {
		t.Skip("the kernel's clocksource is not the TSC here: every claim reads the clock, nothing to check")
	}
	tscObserve(rdtsc(), monoNs())
	time.Sleep(2 * tscCalMin * time.Nanosecond)
	tscObserve(rdtsc(), monoNs())
	for range 5 {
		tsc, now := rdtsc(), monoNs()
		end := now + int64(30*time.Millisecond)
		d := tscDeadline(tsc, now, end)
		require.NotZero(t, d, "the TSC rate is known after two readings 40 ms apart")
		for {
			m := monoNs()
			c := rdtsc()
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

func BenchmarkClaimable_LeaseSet(b *testing.B) {
	w := &Writer{}
	w.fence.Store(^uint64(0))
	tscObserve(rdtsc(), monoNs())
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
			clockSink += rdtsc()
		}
	})
	b.Run("mono", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			clockSink += monoNs()
		}
	})
}
