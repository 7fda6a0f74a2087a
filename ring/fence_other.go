//go:build !amd64

package ring

import "sync/atomic"

// loadFence orders the loads before it before the loads after it: the
// seqlock's copy before its second stamp load. An acquire load (what
// atomic.Load is on arm64) lets earlier loads complete after it; an atomic
// read-modify-write (LDADDAL on arm64) does not, so the reader adds to a
// word of its own.
func loadFence(w *atomic.Uint64) { w.Add(1) }
