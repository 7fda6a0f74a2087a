package subscriber

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tickbus/tickbus/internal/tsc"
)

func TestWallClock_IsTheWallClock(t *testing.T) {
	var c wallClock
	for range 3 * wallIdleEvery {
		before := time.Now().UnixNano()
		v := c.now()
		after := time.Now().UnixNano()
		// Wide bounds (a preempted test, a step of the wall clock): a
		// monotonic reading or a stale offset would be off by years.
		assert.GreaterOrEqual(t, v, before-int64(100*time.Millisecond))
		assert.LessOrEqual(t, v, after+int64(100*time.Millisecond))
	}
}

func TestWallClock_RefreshesWhenOldAtAReadingOrAnIdleLook(t *testing.T) {
	var c wallClock
	c.now()
	const bogus = 12345 // an offset no refresh gives
	// The last refresh an hour from now: nothing is old until at moves
	// back, however long this test is descheduled.
	young := func() { c.at = nanotime() + int64(time.Hour) }
	c.off = bogus
	young()
	for range 100 {
		c.now()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed at a reading before it was %v old", time.Duration(wallRefresh))
	c.at = nanotime() - wallRefresh
	c.now()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed at a reading %v old", time.Duration(wallRefresh))

	c.off = bogus
	young()
	for range 3 * wallIdleEvery {
		c.idled()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed while idle before it was %v old", time.Duration(wallIdleRefresh))
	c.at = nanotime() - wallIdleRefresh
	for i := 1; i < wallIdleEvery; i++ {
		c.idled()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed while idle between looks (every %d empty polls)", wallIdleEvery)
	c.idled()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed at an idle look %v old", time.Duration(wallIdleRefresh))
}

func TestWallClock_AllocatesNothing(t *testing.T) {
	var c wallClock
	assert.Zero(t, testing.AllocsPerRun(10_000, func() { c.now(); c.idled() }))
}

// calibrated is a clock whose TSC rate is learnt (two refreshes
// tscRateMin apart), or a skip where the kernel does not keep time with
// the TSC.
func calibrated(t testing.TB) *wallClock {
	t.Helper()
	if !tsc.Trusted {
		t.Skip("the kernel's clocksource is not the TSC here: the clock reads the vDSO only")
	}
	var c wallClock
	c.refresh()
	for end := time.Now().Add(5 * time.Second); c.mult == 0; time.Sleep(time.Duration(tscRateMin) + time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no TSC rate learnt in 5 s")
		}
		c.refresh()
	}
	return &c
}

func TestWallClock_TSCReadingsFollowTheMonotonicClock(t *testing.T) {
	c := calibrated(t)
	// A TSC reading is the monotonic clock to within its pair's error
	// (half the widest pair accepted) and the rate's over at most
	// wallRefresh (under a ns here); a preemption between the reads only
	// widens [m1, m2].
	slack := int64(float64(tscPairMax)/2*float64(c.mult)/(1<<32)) + int64(200*time.Nanosecond)
	viaTSC := 0
	for i := range 2000 {
		if i%200 == 0 {
			c.refresh() // fresh bases, as the loop's own refreshes give
		}
		if c.mult != 0 {
			viaTSC++ // a refresh under load may drop the rate: that reading is the clock's
		}
		m1 := nanotime()
		v := c.now() - c.off
		m2 := nanotime()
		assert.GreaterOrEqual(t, v, m1-slack, "reading %d", i)
		assert.LessOrEqual(t, v, m2+slack, "reading %d", i)
	}
	assert.NotZero(t, viaTSC, "no reading went through the TSC")
}

func TestWallClock_TSCDisagreeingWithTheClockIsDropped(t *testing.T) {
	c := calibrated(t)
	c.at -= int64(time.Millisecond) // as if the TSC had lost a millisecond against the clock
	c.refresh()
	assert.Zero(t, c.mult, "a TSC 1 ms off the monotonic clock kept its rate")
	before := time.Now().UnixNano()
	v := c.now()
	after := time.Now().UnixNano()
	assert.GreaterOrEqual(t, v, before-int64(100*time.Millisecond))
	assert.LessOrEqual(t, v, after+int64(100*time.Millisecond))
}

func TestWallClock_TSCBackwardsOrStaleReadsTheClock(t *testing.T) {
	c := calibrated(t)
	const bogus = 12345 // an offset no refresh gives
	c.off = bogus
	c.tscAt = tsc.Read() + c.maxTicks // the base ahead of the counter: a count gone backwards
	c.at = nanotime()                 // young: the clock path does not refresh
	v := c.now()
	assert.InDelta(t, nanotime()+bogus, v, float64(10*time.Millisecond), "not the monotonic clock plus the offset")
	c.tscAt = tsc.Read() - c.maxTicks // wallRefresh of counts old: the clock path, which refreshes
	c.at = nanotime() - wallRefresh
	c.now()
	assert.NotEqualValues(t, bogus, c.off, "a reading %v of counts old did not refresh", time.Duration(wallRefresh))
}

var clockSink int64

// BenchmarkWallClock is the poll loop's one clock reading per batch: "tsc"
// once the rate is learnt (the hot path here), "vdso" the monotonic
// clock's path (no TSC rate: before one is learnt, or where the kernel
// does not keep time with the TSC).
func BenchmarkWallClock(b *testing.B) {
	b.Run("tsc", func(b *testing.B) {
		c := calibrated(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			clockSink += c.now()
		}
	})
	b.Run("vdso", func(b *testing.B) {
		var c wallClock
		c.refresh()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.mult = 0 // as before a rate is learnt
			clockSink += c.now()
		}
	})
}
