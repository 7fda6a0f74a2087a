package rdma

// DirectMapper is implemented by queue pairs whose peer's memory is mapped
// into this process (rdma/shm): Direct hands the caller the mapped bytes of
// a remote region, so a hot path can store into them and run CPU atomics on
// them without a work request or a completion. Only a provider whose
// atomics are CPU atomics on that same memory (Caps.Atomic == AtomicGlobal)
// implements it: shm for every peer, tcp only for an unconfined peer QP of
// the same device (a loopback pair within one process, with
// tcp.Config.DirectLoopback); verbs does not. Callers keep the
// work-request path when Direct fails.
type DirectMapper interface {
	// Direct maps remote (Addr..Addr+Len) with the rights need after the
	// checks a WRITE, READ or atomic of the same range would get: the rkey
	// is one the peer sent this QP (a confined QP's peer sends only its
	// grants), the range lies inside that region and the region gives need.
	// It fails with ErrDirect (wrapped, saying which check) and maps
	// nothing otherwise, and with ErrQPState unless the QP is in RTS.
	Direct(remote RemoteRegion, need Access) (DirectMap, error)
}

// DirectMap is a mapped range of a peer's memory (see DirectMapper). The
// memory stays mapped until Close, whatever the QP or the peer does, so a
// store into Bytes never faults; whether anyone still reads it is what Live
// tells.
type DirectMap interface {
	// Bytes is the range: Bytes()[0] is the peer's address remote.Addr.
	Bytes() []byte
	// Live reports whether the QP is still in RTS and the peer still gives
	// it the region. A few loads, no lock; call it from one goroutine.
	Live() bool
	// Close releases the mapping. Idempotent. No store into Bytes may
	// follow it.
	Close() error
}
