// Package tcp is software RDMA over TCP: an rdma.Device for hosts without
// an RDMA NIC, with the semantics of the shm and verbs providers.
//
// Each queue pair uses two TCP connections: the one it dials to the peer's
// device carries its requests (and the peer's responses back); the one the
// peer dials carries the peer's requests, which this side's responder
// applies. Both sides call Connect with the other's endpoint.
//
// Requester: PostSend checks the request against local rules (lkey, SGE
// bounds, inline limit), copies its frame and payload into a per-QP byte
// ring and returns: no lock, no allocation, no system call. PostSendBatch
// does the same for a chain at the cost of one of each per-chain step (the
// source region's pin, completion credits, the posted store, the publish).
// PostSlot posts the WRITEs of one ring slot ((StampBusy,) body, stamp) as
// the same frame and completions as PostSendBatch of their work requests,
// without them: no source region to pin, one check of the room; the ring
// writer's single ticks take it (ring/writer_slot.go). A flusher goroutine
// writes whatever the ring holds with one write (or
// writev when it wraps) per batch, and parks after a few idle yields; once
// it has written everything the ring's cursor rewinds to the start, so a
// stream that keeps up stays on a few warm pages. A reaper goroutine reads
// responses and completes requests in post order onto the send CQ.
//
// Responder: a goroutine per incoming connection reads whole frames, checks
// each op at the target (unknown rkey, out of bounds or a missing right →
// StatusRemoteAccess; a misaligned atomic → StatusRemoteInvalidRequest; no
// posted receive for SEND or WRITE_WITH_IMM → StatusRNRRetryExceeded; the
// target untouched in every case) and applies it. Atomics use sync/atomic on
// the mapped words, so they are atomic against each other from every
// connection, the owner's loopback QP included, and against CPU atomics;
// an aligned 8-byte WRITE is one atomic store. Requests on one connection
// are applied in order, so a payload WRITE followed by a stamp WRITE is seen
// in that order. WRITEs to one region posted in one PostSendBatch travel as
// one WRITE list frame (frame.go): a ring's 64-tick batch, one body WRITE
// and 64 stamps, is one frame to decode, checked whole before any of it is
// applied, each WRITE then checked and answered as if it came alone; the
// stamps, 8-byte WRITEs a slot apart, travel as one run entry of 8 bytes
// each after a 16-byte entry header (a lossy ring's StampBusy WRITEs too).
// WRITE and SEND acknowledgements are cumulative, and the requester says
// in each request when an answer is worth a write(2): soon for one
// request in an eighth of its send queue (reqAckNow: when the input runs
// dry or 64 KiB of input later), when the input runs dry for a signalled
// one posted with few outstanding (reqSignaled); everything else is
// answered with those, or when no more input came for a millisecond. So a
// stream of ticks costs at most one ACK per 256 WRITEs on the link layer's
// 2048-deep queues, and one per chunk the responder reads when a chunk
// holds several of those, not one per 50 as when every signalled WRITE
// asked for one.
//
// Errors follow verbs: an error completion moves the requester's QP to ERR,
// and what is outstanding completes with StatusFlushed. A broken connection
// or a peer silent for Config.AckTimeout completes the oldest outstanding
// request with StatusRetryExceeded. A peer that sends bytes that are not a
// valid frame (see frame.go) has that connection closed and that QP moved to
// ERR; other connections and the device's memory are untouched.
//
// Threads: data connections are read and written with system calls on the
// socket (rawconn.go), not through Go's network poller, because pollers
// spinning with runtime.Gosched starve the poller (it then wakes readers
// only every 10 ms). Readers try Config.ReadSpins non-blocking reads (none
// by default), then wait on a channel that the process's one epoll
// goroutine feeds (poller.go), so no reader blocks in the kernel holding a
// scheduler slot; the epoll goroutine yields its P to the readers it woke,
// so a reader runs on the thread the kernel woke for its data. A flusher
// parks once its buffer is empty; a post wakes it and marks the hand-off
// (rdma/internal/handoff), so the poster's next idle step (rdma.Yield)
// runs it on the poster's P. The idea: on a host whose cores are all busy
// a thread that sleeps is woken promptly by the kernel when its input
// comes, while a spinning one waits for its turn among the runnable. Each
// connected QP has a reaper and a flusher goroutine, each incoming
// connection a responder; Close lingers up to Config.CloseLinger so that
// what was posted reaches the peer.
//
// Regions come from internal/shmem (memfd, shareable), and Register accepts
// memory any device of this process allocated, so one ring can be reached
// through shm and tcp at once.
package tcp
