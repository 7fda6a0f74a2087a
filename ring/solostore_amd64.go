//go:build amd64 && !race

package ring

// soloStore stores the solo word (solo.go) with a plain MOV, inlined: on
// x86-TSO a store is ordered after every earlier load and store, and the
// compiler keeps it in order with the atomic load that follows it in
// soloClaim (that load takes the memory this store produced). The
// Dekker half of the handshake is membarrier's, on Share's side.
func soloStore(p *uint64, v uint64) { *p = v }

// stampStore stores a mapped slot's stamp (direct.go) with a plain MOV,
// inlined: on x86-TSO it is a release store (the reader in the other
// process sees every earlier store of the slot first). The compiler keeps
// Go stores in program order, and the slot's copy between the StampBusy
// and the final stamp keeps the first from being taken for a dead store:
// loads of the payload (putHead's and putTail's, inlined), a
// runtime.memmove call for other lengths, and the branches between them
// (Go's dead-store pass works within one block and stops at a load).
// go tool objdump shows the MOVQ $-1 of StampBusy in leanTick, putSlot
// and putRun.
func stampStore(p *uint64, v uint64) { *p = v }
