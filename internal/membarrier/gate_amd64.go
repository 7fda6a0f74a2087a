//go:build amd64 && !race

package membarrier

// plainStore is a plain MOV, inlined: on x86-TSO a release store, kept
// in program order by the compiler with the atomic load that follows it in
// Enter (that load takes the memory this store produced). Its ordering
// against that load, which TSO does not give, is Fence's, on Shut's side.
func plainStore(p *uint64, v uint64) { *p = v }
