//go:build amd64 && !race

package ring

// soloStore stores the solo word (solo.go) with a plain MOV, inlined: on
// x86-TSO a store is ordered after every earlier load and store, and the
// compiler keeps it in order with the atomic load that follows it in
// soloClaim (that load takes the memory this store produced). The
// Dekker half of the handshake is membarrier's, on Share's side.
func soloStore(p *uint64, v uint64) { *p = v }
