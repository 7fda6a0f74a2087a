//go:build !race

package ring

import "sync/atomic"

// warmLine loads the word at off (the second cache line of a slot) and
// throws it away. The poll loop issues it beside the stamp load, so that a
// slot whose tick spans two lines costs one cross-core miss, not two in a
// row (the stamp's line, then the payload's): the CPU has both loads in
// flight at once. It orders nothing and its value is never used; the
// tick's bytes are read again after the stamp load, as before. Under the
// race detector it is a no-op (a load of bytes a writer may be copying is
// a race in the Go memory model, if the ring is Go memory).
func warmLine(mem []byte, off int) uint64 { return at[atomic.Uint64](mem, off).Load() }
