//go:build amd64

package ring

// prefetchSlot asks for the two cache lines from p on in a writable state
// (PREFETCHW), without waiting for them.
//
//go:noescape
func prefetchSlot(p *byte)
