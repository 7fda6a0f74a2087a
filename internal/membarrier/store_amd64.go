//go:build amd64 && !race

package membarrier

// StoreRelease stores v at p with a plain MOV, inlined: on x86-TSO every
// store is a release store (ordered after every earlier load and store),
// and the compiler keeps Go stores in program order, and in order with an
// atomic load that follows (that load takes the memory this store
// produced). What TSO does not give, the store's order against a later
// load of another word, is Fence's in a Dekker handshake (Gate, the ring's
// solo word). Under the race detector, and where a plain store is not a
// release store, it is sync/atomic's (store_other.go).
func StoreRelease(p *uint64, v uint64) { *p = v }
