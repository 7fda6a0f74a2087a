//go:build amd64 && !race

package shm

// storeRelease stores v at *p with release semantics: every load and store
// before it is visible to another CPU before v is. Under x86-TSO a plain
// MOV is such a store (stores are not reordered with earlier loads or
// stores), and the assembly call keeps the compiler from moving Go stores
// across it; sync/atomic's Store is an XCHG, a full fence we do not need.
// The loads it pairs with are sync/atomic loads (a stamp's reader, waitGen)
// or a CAS (enterSlow). Not for Dekker-style store-then-load handshakes:
// a later load of this goroutine may still pass it.
//
//go:noescape
func storeRelease(p *uint64, v uint64)
