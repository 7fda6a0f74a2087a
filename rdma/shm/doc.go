// Package shm is the rdma provider for peers on one host: regions are
// memfd-backed, handed to a connecting peer over a unix socket with
// SCM_RIGHTS after a peer-credential check, and the requester maps them and
// does the copy or the atomic itself: one copy, no kernel on the data path.
//
// Control plane: each Device listens on a Linux abstract unix socket
// (SOCK_SEQPACKET) named "@tickbus-shm-<pid>-<random>", so nothing is ever
// left in the file system, even after SIGKILL; Endpoint.Addr carries the
// name. Connect dials the peer's device, checks its uid (SO_PEERCRED: ours or
// Config.AllowUIDs; the accepting side checks the same), and receives the
// peer QP's receive queue and every region of the peer's device that grants
// a remote right. Regions registered later are pushed to every connected
// peer, and RegisterMemory returns only when each peer has mapped them;
// Region.Close returns only when each has unmapped them. QPs of one device
// connected to the same peer device share one mapping of each peer region. The protocol is
// versioned and every frame is checked (see wire.go); a peer that breaks it
// loses its connection, and the QP it served goes to ERR.
//
// Data plane: PostSend runs the request at once on the mapped memory, with
// the checks a target makes (unknown rkey, out of bounds, missing right:
// StatusRemoteAccess; misaligned atomic: StatusRemoteInvalidRequest; memory
// untouched), in post order. An 8-byte WRITE to an 8-aligned address is one
// 64-bit release store (see QP.PostSend for the store/load pairing the
// ring's stamp relies on). PostSendBatch (rdma.BatchPoster) runs a chain of
// requests in one call, as verbs' wr->next list. CAS and FAA are CPU atomics on the mapped word, so
// Caps().Atomic is rdma.AtomicGlobal. SEND and WRITE_WITH_IMM claim the
// peer's next posted receive through a small shared queue (queue.go); the
// peer's RecvCQ turns them into completions when it polls. With no receive
// posted the sender gets StatusRNRRetryExceeded at once (no retry).
//
// Each request finishes before PostSend returns, so FlagFence needs nothing
// and a completion means the bytes are in place. As on verbs, an error
// completion moves the QP to ERR. Send-queue entries are held, signalled or
// not, until a completion of the QP at or after them is polled; a request
// that could produce a completion first reserves room in the send CQ, so the
// CQ never overflows: PostSend returns rdma.ErrSendQueueFull instead. Posts
// to one QP from several goroutines are serialised by a CAS (uncontended:
// one atomic per PostSend or PostSendBatch call); polling a CQ is for one
// goroutine at a time. Each QP caches its last rkey's and lkey's regions,
// so a stream of requests to one ring does no map lookup.
//
// Trust: memfds arrive sealed against shrinking (internal/shmem seals them;
// an unsealed one is refused, since its sender could truncate it under our
// mapping), regions no peer may write, and read-only grants, travel as
// read-only fds (reopened through /proc/self/fd with O_RDONLY: mmap
// PROT_WRITE of them fails with EACCES), and every geometry a peer
// announces is checked against the files before mapping. Memory in grant
// units (rdma.MemoryConfig, RegisterMemoryUnits) is one memfd per unit,
// mapped contiguously with MAP_FIXED; a region travels as the memfds its
// grant covers, no other (regionAdd, then one regionUnit per further
// memfd), so a peer granted part of it holds nothing of the other units,
// whatever it does with what it holds.
// Peers within the same uid (or Config.AllowUIDs) are trusted not to
// exhaust memory with huge regions.
//
// Peer death: the control socket's EOF moves the QP to ERR; every later post
// completes with StatusFlushed. Shared memory outlives a dead peer in the
// mappings that remain, so nothing faults, and memfds leave nothing in
// /dev/shm or the temp dir.
//
// Close of a QP, a region or the device never unmaps memory a concurrent
// PostSend or Poll is using: each makes a generation word odd on entry
// (an atomic CAS or add: a full fence) and even on exit (a release store),
// and the closer unpublishes first, then waits for the word to be even or
// to move (see QP).
package shm
