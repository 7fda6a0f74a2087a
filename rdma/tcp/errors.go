package tcp

import "errors"

// Sentinel errors of the tcp provider; the rdma package's sentinels
// (rdma.ErrClosed, rdma.ErrSendQueueFull, …) are used where they fit.
var (
	// ErrFrame: a data connection carried bytes that are not a valid frame.
	// The connection is closed and its queue pair moves to ERR.
	ErrFrame = errors.New("tcp: malformed frame")
	// ErrHandshake: a data connection's handshake was malformed or failed.
	ErrHandshake = errors.New("tcp: handshake failed")
	// ErrHandshakeVersion: the peer speaks another handshake version.
	ErrHandshakeVersion = errors.New("tcp: unknown handshake version")
	// ErrNotRegistrable: Register was given memory that no device of this
	// process allocated.
	ErrNotRegistrable = errors.New("tcp: memory was not allocated by a tickbus device of this process")
	// ErrRemoteAccess: the peer named an rkey it may not use (unknown, not
	// granted to this queue pair, out of bounds or without the right). The
	// request is refused, the connection closed and the queue pair moved to
	// ERR, as a verbs responder does on a remote access error.
	ErrRemoteAccess = errors.New("tcp: remote access error")
)
