//go:build !amd64 || race

package shm

import "sync/atomic"

// storeRelease stores v at *p with (at least) release semantics. Elsewhere
// than amd64, and under the race detector (which cannot see an assembly
// store, so would miss the happens-before it carries), it is
// sync/atomic's sequentially consistent store. See storerel_amd64.go.
func storeRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
