package rdma

import "errors"

// Sentinel errors. Test them with errors.Is.
var (
	ErrClosed           = errors.New("rdma: closed")
	ErrQPState          = errors.New("rdma: queue pair is not in a state that allows this")
	ErrSendQueueFull    = errors.New("rdma: send queue full")
	ErrRecvQueueFull    = errors.New("rdma: receive queue full")
	ErrInvalidRequest   = errors.New("rdma: invalid work request")
	ErrInvalidConfig    = errors.New("rdma: invalid configuration")
	ErrNoDevice         = errors.New("rdma: no device")
	ErrNotSupported     = errors.New("rdma: not supported by this provider")
	ErrProviderMismatch = errors.New("rdma: endpoint is for another provider")
	ErrPeerRefused      = errors.New("rdma: peer refused the connection")
	ErrPeerNotFound     = errors.New("rdma: peer queue pair not found")
	ErrMalformed        = errors.New("rdma: malformed descriptor")
	ErrUnknownVersion   = errors.New("rdma: unknown descriptor version")
	ErrCompletion       = errors.New("rdma: completion error")
	// ErrGrant: a Grant named a region of another device, a closed one, or
	// rights the region does not give.
	ErrGrant = errors.New("rdma: invalid grant")
	// ErrDirect: DirectMapper.Direct refused the range (unknown rkey, out
	// of the region's bounds, or a right the region does not give).
	ErrDirect = errors.New("rdma: cannot map the remote range directly")
)
