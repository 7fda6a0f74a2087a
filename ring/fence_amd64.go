//go:build amd64

package ring

import "sync/atomic"

// loadFence orders the loads before it before the loads after it: the
// seqlock's copy before its second stamp load. amd64 (TSO) never reorders a
// load with a later load, and the compiler keeps loads on their side of
// the atomic loads around them, so it is nothing here.
func loadFence(*atomic.Uint64) {}
