//go:build !amd64 || race

package ring

import "sync/atomic"

// soloStore: sync/atomic's store where a plain one is not a release store,
// and under the race detector (see solostore_amd64.go).
func soloStore(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

// stampStore: see solostore_amd64.go.
func stampStore(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
