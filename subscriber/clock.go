package subscriber

import (
	"math"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/tickbus/tickbus/internal/tsc"
)

// nanotime is the runtime's CLOCK_MONOTONIC reading (vDSO), one clock read
// where time.Now makes two (the wall clock and the monotonic one).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// wallClock gives the poll loop the wall clock (Unix ns, what publishers
// stamp ticks with) for one monotonic reading: the offset between the two
// clocks, re-read with time.Now (four clock reads) when it is
// wallIdleRefresh old and the loop is idle (looked at every wallIdleEvery
// empty polls, off the path of any tick), or when it is wallRefresh old at
// a reading (a feed that never lets the loop idle; the reading's own
// monotonic read tells the age, so that check costs nothing). Each vDSO
// clock read costs 40 to 180 ns of CPU on this project's VM, where
// time.Now per batch was a fifth of the one-way software path, and a
// refresh every 64 empty polls (every 2 µs of a spinning loop) kept a
// tenth of the loop's time in clock reads. A step of the wall clock (this
// VM's sync steps it 0.5 ms at times) is seen within wallIdleRefresh plus
// wallIdleEvery empty polls, or wallRefresh. The poll goroutine owns it.
//
// Where the kernel keeps time with the TSC (tsc.Trusted), the monotonic
// reading itself is the TSC (about 20 ns, against 48 for the vDSO here,
// measured by ring's BenchmarkClock) counted from the last refresh, which
// pairs a TSC value with a monotonic reading: at most wallRefresh of
// counts at a rate re-learnt from two refreshes tscRateMin or more apart
// (so it follows the monotonic clock's NTP slewing), checked at every
// refresh against the monotonic clock (a disagreement over tscTolerance
// drops the rate until it is learnt again). A count that went backwards
// or past wallRefresh reads the monotonic clock instead.
type wallClock struct {
	off  int64  // wall minus monotonic at the last refresh; 0: not yet read
	at   int64  // monotonic ns of the last refresh
	idle uint32 // empty polls since the last look at the clock

	tscAt    int64  // TSC at at (the midpoint of two reads around it)
	mult     uint64 // ns per TSC count in 32.32 fixed point; 0: not known, read the clock
	maxTicks int64  // TSC counts in wallRefresh at mult (now's bound)
	idleTick int64  // TSC counts in wallIdleRefresh at mult (idled's)
	tsc0     int64  // the rate's base pair: TSC ...
	mono0    int64  // ... and monotonic ns; 0: none yet
}

const (
	wallIdleEvery   = 64
	wallIdleRefresh = int64(time.Millisecond)
	wallRefresh     = int64(10 * time.Millisecond)
	// tscRateMin is the shortest span a TSC rate is taken over: the pairs'
	// error (a few ns) is then a part in 10^7, under a ns over wallRefresh.
	tscRateMin = int64(50 * time.Millisecond)
	// tscTolerance is how far the TSC's count may stray from the
	// monotonic clock between two refreshes before the rate is dropped.
	tscTolerance = int64(time.Microsecond)
	// tscPairMax bounds the TSC counts between the two reads around the
	// monotonic one of a usable pair (a clock read is under 200 ns; this
	// is 1 µs at 4 GHz, 4 at 1 GHz).
	tscPairMax = 1 << 12
)

// now is the wall clock in Unix ns.
func (c *wallClock) now() int64 {
	if c.mult != 0 {
		if d := tsc.Read() - c.tscAt; d >= 0 && d < c.maxTicks {
			return c.at + c.off + int64((uint64(d)*c.mult)>>32) // d < maxTicks: no overflow
		}
	}
	m := nanotime()
	if m-c.at >= wallRefresh || c.off == 0 {
		m = c.refresh()
	}
	return m + c.off
}

// idled counts an empty poll; now and then it looks at the clock, and
// re-reads the offset if it is wallIdleRefresh old.
func (c *wallClock) idled() {
	if c.idle++; c.idle >= wallIdleEvery {
		c.idle = 0
		if c.mult != 0 {
			if d := tsc.Read() - c.tscAt; d >= 0 && d < c.idleTick {
				return
			}
		}
		if nanotime()-c.at >= wallIdleRefresh {
			c.refresh()
		}
	}
}

// refresh re-reads the offset: the wall clock between two monotonic
// readings, against their midpoint; and pairs a TSC value with a
// monotonic reading. It returns the last monotonic reading.
func (c *wallClock) refresh() int64 {
	best := int64(-1)
	var m2 int64
	for range 3 { // the tightest of three, should the goroutine be preempted between reads
		m1 := nanotime()
		w := time.Now().UnixNano()
		m2 = nanotime()
		if best < 0 || m2-m1 < best {
			best, c.off = m2-m1, w-(m1+(m2-m1)/2)
		}
		if best < int64(10*time.Microsecond) {
			break
		}
	}
	if c.off == 0 {
		c.off = 1 // 0 means unread
	}
	if tsc.Trusted {
		m2 = c.pairTSC()
	}
	c.at, c.idle = m2, 0
	return m2
}

// pairTSC reads the TSC around a monotonic reading (the tightest of three)
// and updates the rate; it sets c.tscAt and returns the reading (c.at is
// still the previous refresh's).
func (c *wallClock) pairTSC() int64 {
	var m, t int64
	best := int64(-1)
	for range 3 {
		t1 := tsc.Read()
		mm := nanotime()
		t2 := tsc.Read()
		if best < 0 || t2-t1 < best {
			best, m, t = t2-t1, mm, t1+(t2-t1)/2
		}
	}
	if best > tscPairMax {
		// Reads far apart (preempted three times): not a base for the
		// next readings, nor for a rate.
		c.mult, c.mono0, c.tscAt = 0, 0, t
		return m
	}
	if c.mult != 0 {
		// The count since the last refresh against the clock: a TSC that
		// jumped (or a rate gone stale) drops the rate.
		if d := t - c.tscAt; d < 0 || math.Abs(float64(d)*float64(c.mult)/(1<<32)-float64(m-c.at)) > float64(tscTolerance) {
			c.mult, c.mono0 = 0, 0
		}
	}
	switch {
	case c.mono0 == 0 || t <= c.tsc0 || m <= c.mono0:
		c.tsc0, c.mono0 = t, m
	case m-c.mono0 >= tscRateMin:
		perTick := float64(m-c.mono0) / float64(t-c.tsc0)
		if perTick > 0 && perTick < 1e3 { // a TSC of 1 MHz to beyond 1 THz
			c.mult = uint64(perTick * (1 << 32))
			c.maxTicks = int64(float64(wallRefresh) / perTick)
			c.idleTick = int64(float64(wallIdleRefresh) / perTick)
		}
		c.tsc0, c.mono0 = t, m
	}
	c.tscAt = t
	return m
}
