//go:build !linux

package rdma

// osYield is a no-op where sched_yield is not wired (see idle_linux.go).
func osYield() {}

// goschedOneIn is 1 here: without sched_yield, yieldOnce is Gosched.
const (
	goschedOneIn    = 1
	goschedNetOneIn = 1
)
