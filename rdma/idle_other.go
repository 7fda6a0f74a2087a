//go:build !linux

package rdma

import (
	"sync/atomic"
	"time"
)

// osYield is a no-op where sched_yield is not wired (see idle_linux.go).
func osYield() {}

// osSleeper is time.Sleep here (see idle_linux.go).
type osSleeper struct{}

func (*osSleeper) sleep(d time.Duration) { time.Sleep(d) }

// goschedOneIn is 1 here: without sched_yield, yieldOnce is Gosched.
const (
	goschedOneIn    = 1
	goschedNetOneIn = 1
)

var (
	rawSleepersMax atomic.Int32  // always 0 here: no raw sleeps
	rawSleeps      atomic.Uint64 // always 0 here
)
