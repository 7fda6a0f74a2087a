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
// clocks, re-read with time.Now while the loop is idle (every
// wallIdleEvery empty polls, off the path of any tick) and every
// wallRefreshEvery readings (a feed that never lets the loop idle). Each
// vDSO clock read costs 40 to 180 ns of CPU on this project's VM, where
// time.Now per batch was a fifth of the one-way software path. A step of
// the wall clock (this VM's sync steps it 0.5 ms at times) is seen within
// wallIdleEvery empty polls, or wallRefreshEvery batches. The poll
// goroutine owns it.
type wallClock struct {
	off   int64  // wall minus monotonic at the last refresh; 0: not yet read
	reads uint32 // readings since the last refresh
	idle  uint32 // empty polls since the last refresh
}

const (
	wallRefreshEvery = 64
	wallIdleEvery    = 64
)

// now is the wall clock in Unix ns.
func (c *wallClock) now() int64 {
	if c.reads++; c.reads >= wallRefreshEvery || c.off == 0 {
		c.refresh()
	}
	return nanotime() + c.off
}

// idled counts an empty poll; now and then it re-reads the offset.
func (c *wallClock) idled() {
	if c.idle++; c.idle >= wallIdleEvery {
		c.refresh()
	}
}

// refresh re-reads the offset: the wall clock between two monotonic
// readings, against their midpoint.
func (c *wallClock) refresh() {
	best := int64(-1)
	for range 3 { // the tightest of three, should the goroutine be preempted between reads
		m1 := nanotime()
		w := time.Now().UnixNano()
		m2 := nanotime()
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
	c.reads, c.idle = 0, 0
}
