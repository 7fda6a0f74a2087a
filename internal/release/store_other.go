//go:build !amd64 || race

package release

import "sync/atomic"

// Store64 stores v at *p with (at least) release semantics: here
// sync/atomic's sequentially consistent store (STLR on arm64). See the
// package doc.
func Store64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
