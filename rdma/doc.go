// Package rdma is tickbus's verbs-shaped transport API.
//
// It models ibverbs closely enough that the verbs provider is a thin mapping
// and the software providers (shm for peers on one host, tcp for hosts
// without RDMA NICs) behave the same way:
//
//   - A Device registers memory and returns a MemoryRegion with an lkey, an
//     rkey and the Access it grants. A RemoteRegion{Addr, RKey, Len} is what
//     travels to peers.
//   - A QueuePair's peer reaches only what it was granted (Grant,
//     GrantRange). Memory may be backed in grant units (MemoryConfig:
//     AllocMemory, then Device.Register on each device; or RegisterMemory),
//     so that a provider whose peers map what they are granted (shm) hands
//     a range grant's peer only the units the range covers.
//   - A QueuePair is reliable-connected. LocalEndpoint is what the peer needs;
//     Connect walks RESET → INIT → RTR → RTS; an error moves it to ERR, after
//     which every posted request completes with StatusFlushed.
//   - PostSend never blocks. A full send queue is ErrSendQueueFull. A
//     BatchPoster posts a chain of requests in one call (PostSendBatch).
//   - CompletionQueue.Poll never blocks and returns how many completions it
//     filled. Callers spin on it through an IdleStrategy.
//   - Every remote op is checked at the target: an unknown rkey, an op out of
//     bounds, missing access or a misaligned atomic completes with an error
//     status and the target's memory is untouched.
//
// Addresses are virtual addresses in the owner's address space, as in verbs:
// a RemoteRegion's Addr is the base of the owner's mapping, and an op at
// Addr+off touches byte off of the region. SGE addresses are local virtual
// addresses inside a region registered on the same device.
//
// rdma knows nothing of ticks or NATS.
package rdma
