//go:build !linux

package rdma

// osYield is a no-op where sched_yield is not wired (see idle_linux.go).
func osYield() {}
