//go:build amd64 && !race

package release

// Store64 stores v at *p with release semantics: every load and store the
// caller made before it is visible to another CPU before v is. The load it
// pairs with is a sync/atomic load (or CAS) of *p.
//
//go:noescape
func Store64(p *uint64, v uint64)
