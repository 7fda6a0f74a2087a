//go:build !amd64 || race

package membarrier

import "sync/atomic"

// StoreRelease: sync/atomic's store where a plain one is not a release
// store, and under the race detector, which sees no plain store's order
// (see store_amd64.go).
func StoreRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
