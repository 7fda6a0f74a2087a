package subscriber

import (
	"time"
	_ "unsafe" // for go:linkname
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
// empty polls, with one monotonic read, off the path of any tick), or when
// it is wallRefresh old at a reading (a feed that never lets the loop
// idle; the reading's own monotonic read tells the age, so that check
// costs nothing). Each vDSO clock read costs 40 to 180 ns of CPU on this
// project's VM, where time.Now per batch was a fifth of the one-way
// software path, and a refresh every 64 empty polls (every 2 µs of a
// spinning loop) kept a tenth of the loop's time in clock reads. A step of
// the wall clock (this VM's sync steps it 0.5 ms at times) is seen within
// wallIdleRefresh plus wallIdleEvery empty polls, or wallRefresh. The poll
// goroutine owns it.
type wallClock struct {
	off  int64  // wall minus monotonic at the last refresh; 0: not yet read
	at   int64  // monotonic ns of the last refresh
	idle uint32 // empty polls since the last look at the clock
}

const (
	wallIdleEvery   = 64
	wallIdleRefresh = int64(time.Millisecond)
	wallRefresh     = int64(10 * time.Millisecond)
)

// now is the wall clock in Unix ns.
func (c *wallClock) now() int64 {
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
		if nanotime()-c.at >= wallIdleRefresh {
			c.refresh()
		}
	}
}

// refresh re-reads the offset: the wall clock between two monotonic
// readings, against their midpoint. It returns the last monotonic reading.
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
	c.at, c.idle = m2, 0
	return m2
}
