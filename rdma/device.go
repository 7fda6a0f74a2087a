package rdma

import (
	"context"
	"fmt"
)

// Provider names, as carried in Endpoint.Provider.
const (
	ProviderShm   = "shm"
	ProviderTCP   = "tcp"
	ProviderVerbs = "verbs"
)

// AtomicCap says against what a device's atomics are atomic, as
// enum ibv_atomic_cap.
type AtomicCap uint8

const (
	// AtomicNone: the device has no remote atomics. tickbus refuses it for a
	// topic's home.
	AtomicNone AtomicCap = iota
	// AtomicHCA: atomic only against other atomics through the same device
	// (IBV_ATOMIC_HCA). Every update of a counter must go through a QP, the
	// owner's own included.
	AtomicHCA
	// AtomicGlobal: atomic against CPU atomics too (IBV_ATOMIC_GLOB).
	AtomicGlobal
)

// Caps are a device's limits.
type Caps struct {
	MaxInline    int       // largest FlagInline payload
	MaxMsgSize   int       // largest single transfer
	MaxQPDepth   int       // largest send or receive queue
	MaxCQDepth   int       // largest completion queue
	MaxRegion    int       // largest single region in bytes
	Atomic       AtomicCap // against what remote atomics are atomic
	ShareMemory  bool      // regions are memfd-backed and mappable by a peer
	CrossProcess bool      // peers may be other processes
	// GrantPerQP: QueuePair.Grant and QPConfig.Confined confine a queue
	// pair's peer to its grants.
	GrantPerQP bool
	// GrantOnly: a region's own rkey (MemoryRegion.RKey, Remote) grants no
	// remote access on any queue pair; a peer reaches a region only by the
	// rkey a Grant of its queue pair returned (verbs with type 2B memory
	// windows: the region is registered for local access and window binds
	// only). A queue pair never granted anything then reaches nothing.
	GrantOnly bool
}

// Device is an opened provider instance: it registers memory and makes
// completion queues and queue pairs. It is safe for concurrent use on control
// paths.
type Device interface {
	// Provider is ProviderShm, ProviderTCP or ProviderVerbs.
	Provider() string
	// HostID names the host this device runs on, as the node configured it.
	HostID() string
	Caps() Caps
	// RegisterMemory allocates size bytes (page-aligned, zeroed, pre-touched,
	// shareable with a peer on this host) and registers them.
	RegisterMemory(size int, access Access) (MemoryRegion, error)
	// Register registers memory that a MemoryRegion of this process already
	// holds (its Bytes, or a page-aligned part of them), so one ring can be
	// reached through several providers. The returned region does not own the
	// memory: closing it only deregisters.
	Register(mem []byte, access Access) (MemoryRegion, error)
	CreateCQ(depth int) (CompletionQueue, error)
	CreateQP(cfg QPConfig) (QueuePair, error)
	// Close closes every QP, CQ and region the device made. Idempotent.
	Close() error
}

// MemoryRegion is registered memory.
type MemoryRegion interface {
	Bytes() []byte
	// Addr is the virtual address of Bytes()[0]; SGEs and RemoteRegion use it.
	Addr() uint64
	LKey() uint32
	RKey() uint32
	Access() Access
	// Remote is what a peer needs to reach this region.
	Remote() RemoteRegion
	// Close deregisters the region and, if it owns its memory, unmaps it.
	// Later remote ops naming its rkey complete with StatusRemoteAccess.
	Close() error
}

// LocalSGE returns the SGE for n bytes at offset off of mr.
func LocalSGE(mr MemoryRegion, off, n int) SGE {
	return SGE{Addr: mr.Addr() + uint64(off), Len: uint32(n), LKey: mr.LKey()}
}

// CompletionQueue collects completions of one or more queue pairs.
type CompletionQueue interface {
	// Poll fills buf with up to len(buf) completions and returns how many.
	// It never blocks. One goroutine polls a CQ at a time.
	Poll(buf []Completion) int
	// Close releases the CQ. Idempotent.
	Close() error
}

// QPState is a queue pair's state, as enum ibv_qp_state.
type QPState uint8

const (
	QPReset QPState = iota
	QPInit
	QPReadyToReceive // RTR
	QPReadyToSend    // RTS
	QPError          // ERR: every request completes with StatusFlushed
	QPClosed         // after Close
)

func (s QPState) String() string {
	switch s {
	case QPReset:
		return "RESET"
	case QPInit:
		return "INIT"
	case QPReadyToReceive:
		return "RTR"
	case QPReadyToSend:
		return "RTS"
	case QPError:
		return "ERR"
	case QPClosed:
		return "CLOSED"
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// QPConfig configures a reliable-connected queue pair.
type QPConfig struct {
	SendCQ    CompletionQueue // required
	RecvCQ    CompletionQueue // required; may be SendCQ
	SendDepth int             // outstanding send requests, signalled or not
	RecvDepth int             // posted receives
	MaxInline int             // largest FlagInline payload; 0 means the device's
	// SignalAll completes every request, as sq_sig_all; otherwise only those
	// with FlagSignaled (and every error) complete.
	SignalAll bool
	// Confined: the peer reaches no region of this device until Grant gives
	// it one (see QueuePair.Grant); for queue pairs whose peer has nothing
	// to reach, and those granted everything before Connect.
	Confined bool
}

// Validate checks the parts of cfg every provider needs.
func (c QPConfig) Validate(caps Caps) error {
	switch {
	case c.SendCQ == nil:
		return fmt.Errorf("%w: SendCQ is nil", ErrInvalidConfig)
	case c.RecvCQ == nil:
		return fmt.Errorf("%w: RecvCQ is nil", ErrInvalidConfig)
	case c.SendDepth < 1 || (caps.MaxQPDepth > 0 && c.SendDepth > caps.MaxQPDepth):
		return fmt.Errorf("%w: SendDepth %d, want 1..%d", ErrInvalidConfig, c.SendDepth, caps.MaxQPDepth)
	case c.RecvDepth < 0 || (caps.MaxQPDepth > 0 && c.RecvDepth > caps.MaxQPDepth):
		return fmt.Errorf("%w: RecvDepth %d, want 0..%d", ErrInvalidConfig, c.RecvDepth, caps.MaxQPDepth)
	case c.MaxInline < 0 || c.MaxInline > caps.MaxInline:
		return fmt.Errorf("%w: MaxInline %d, want 0..%d", ErrInvalidConfig, c.MaxInline, caps.MaxInline)
	case c.Confined && !caps.GrantPerQP:
		return fmt.Errorf("%w: Confined, but this device cannot confine a queue pair to its grants", ErrNotSupported)
	}
	return nil
}

// QueuePair is a reliable-connected queue pair.
type QueuePair interface {
	// Num is the queue pair number, unique on its device.
	Num() uint32
	State() QPState
	// LocalEndpoint is what the peer passes to its own Connect.
	LocalEndpoint() Endpoint
	// Connect walks RESET → INIT → RTR → RTS towards remote. Both sides call
	// it with the other's endpoint. A QP may connect to another QP of its own
	// device (loopback). On failure the QP moves to ERR.
	Connect(ctx context.Context, remote Endpoint) error
	// PostSend queues wr and never blocks. Errors returned here (closed QP,
	// full send queue, a request no provider could run) mean nothing was
	// queued; every other failure arrives as a completion status.
	PostSend(wr *WorkRequest) error
	// PostRecv queues a receive for an incoming SEND or WRITE_WITH_IMM.
	PostRecv(rr *RecvRequest) error
	// Grant lets this queue pair's peer reach mr, a region of the same
	// device, with access (remote rights only, a subset of mr's), and
	// returns the RemoteRegion the peer names it by. A queue pair never
	// granted anything reaches every remote-accessible region of its
	// device (none where Caps.GrantOnly); its first Grant confines it to
	// what it was granted (on verbs: a type 2 memory window bound to the
	// QP, whose rkey works on no other QP). Grant before
	// Connect, or after: a region granted later becomes reachable when Grant
	// returns. An op on an ungranted region, or beyond the granted access,
	// completes with StatusRemoteAccess, the memory untouched.
	Grant(mr MemoryRegion, access Access) (RemoteRegion, error)
	// GrantRange is Grant of the n bytes at offset off of mr only: the
	// returned RemoteRegion is {mr.Addr()+off, its rkey, n}, and an op
	// that reaches outside that range completes with StatusRemoteAccess,
	// the memory untouched (on verbs: a memory window bound to the range;
	// on shm the peer maps only the pages the range covers and checks the
	// range, and is handed the memory of only the grant units the range
	// covers (MemoryConfig), or, of memory not in units, the whole
	// region's; on tcp the responder checks it). A queue pair holds one range
	// per region: a later grant of the same region must name the same
	// range (its rights add up), else it fails with ErrGrant.
	GrantRange(mr MemoryRegion, off, n int, access Access) (RemoteRegion, error)
	// Close moves the QP to CLOSED, flushes what is outstanding and releases
	// the connection. Idempotent; safe while another goroutine polls.
	Close() error
}
