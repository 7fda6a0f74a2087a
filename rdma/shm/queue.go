package shm

import (
	"sync/atomic"
	"unsafe"
)

// A receive queue lets a peer tell this QP about a SEND or a
// WRITE_WITH_IMM. The receiving QP creates it (a memfd, at CreateQP) and
// hands it to the peer that connects; the peer maps it and is its only
// producer; the receiver's RecvCQ drains it on Poll.
//
// Layout, native endian (both ends share the host):
//
//	off 0    u64 magic
//	off 8    u32 capacity (power of two ≥ RecvDepth), u32 max send, u32 slot size
//	off 128  u64 posted  — receives posted so far. Written by the receiver
//	                       (atomic store in PostRecv, after recvLen), read by
//	                       the sender (atomic load) as its credit.
//	off 256  u64 claimed — receives the sender has consumed. Written by the
//	                       sender only (CAS), read by nobody else.
//	off 384  [capacity]u32 recvLen — buffer length of receive i at i&mask,
//	                       stored (atomic) before posted; loaded by the sender
//	                       after it loaded posted.
//	then     [capacity] slots of slot-size bytes, 128-aligned:
//	           u64 seq   — i+1 once message i is complete. The sender's
//	                       atomic store, after the fields and payload, pairs
//	                       with the receiver's atomic load in drain.
//	           u32 kind, u32 len, u32 imm, u32 pad
//	           u64 pad, payload[max send]
//
// Message i always belongs to receive i: the sender claims receive i before
// it writes slot i&mask, so a message never waits for a receive and the
// queue can never overflow (at most RecvDepth receives are outstanding, and
// capacity ≥ RecvDepth). A SEND with no receive posted completes at the
// sender with rdma.StatusRNRRetryExceeded at once: shm does not retry,
// since a receive that was not posted when the SEND ran is a bug of the
// application protocol (like rnr_retry = 0 on verbs).
const (
	queueMagic     = 0x7462_7368_6d71_0001 // "tbshmq", version 1
	qOffCap        = 8
	qOffMaxSend    = 12
	qOffSlot       = 16
	qOffPosted     = 128
	qOffClaimed    = 256
	qOffRecvLen    = 384
	slotHeader     = 32
	slotOffKind    = 8
	slotOffLen     = 12
	slotOffImm     = 16
	defaultMaxSend = 4096
	maxSendLimit   = 1 << 20
)

// Message kinds in a slot.
const (
	kindSend     = 1 // payload of len bytes, imm
	kindWriteImm = 2 // a WRITE of len bytes landed; imm
	kindTooLong  = 3 // a SEND of len bytes was longer than the receive buffer
)

func alignUp(n, a int) int { return (n + a - 1) / a * a }

func slotSize(maxSend int) uint32 { return uint32(alignUp(slotHeader+maxSend, 64)) }

func slotsOffset(qcap int) int { return alignUp(qOffRecvLen+4*qcap, 128) }

func queueBytes(qcap, maxSend int) int {
	return slotsOffset(qcap) + qcap*int(slotSize(maxSend))
}

// queue is a view of a receive queue mapped into this process, by its owner
// or by its sender. The geometry is this side's own copy, never re-read from
// the shared memory, so a peer scribbling on the header cannot move our
// accesses out of bounds.
type queue struct {
	mem     []byte
	mask    uint64
	maxSend int
	slot    int
	slots   int // offset of slot 0
}

func newQueueView(mem []byte, qcap, maxSend int) *queue {
	return &queue{
		mem:     mem,
		mask:    uint64(qcap - 1),
		maxSend: maxSend,
		slot:    int(slotSize(maxSend)),
		slots:   slotsOffset(qcap),
	}
}

// initHeader writes the header of a fresh queue (owner only).
func (q *queue) initHeader() {
	*(*uint64)(unsafe.Pointer(&q.mem[0])) = queueMagic
	*(*uint32)(unsafe.Pointer(&q.mem[qOffCap])) = uint32(q.mask + 1)
	*(*uint32)(unsafe.Pointer(&q.mem[qOffMaxSend])) = uint32(q.maxSend)
	*(*uint32)(unsafe.Pointer(&q.mem[qOffSlot])) = uint32(q.slot)
}

// headerMatches checks the magic and geometry the owner wrote (sender side,
// once at connect).
func (q *queue) headerMatches() bool {
	return *(*uint64)(unsafe.Pointer(&q.mem[0])) == queueMagic &&
		*(*uint32)(unsafe.Pointer(&q.mem[qOffCap])) == uint32(q.mask+1) &&
		*(*uint32)(unsafe.Pointer(&q.mem[qOffMaxSend])) == uint32(q.maxSend) &&
		*(*uint32)(unsafe.Pointer(&q.mem[qOffSlot])) == uint32(q.slot)
}

func (q *queue) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&q.mem[off])) }
func (q *queue) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&q.mem[off])) }

// posted: receiver stores, sender loads.
func (q *queue) posted() *uint64 { return q.u64(qOffPosted) }

// claimed: sender only.
func (q *queue) claimed() *uint64 { return q.u64(qOffClaimed) }

// recvLen of receive i: receiver stores before posted, sender loads after.
func (q *queue) recvLen(i uint64) *uint32 { return q.u32(qOffRecvLen + 4*int(i&q.mask)) }

func (q *queue) slotAt(i uint64) int { return q.slots + int(i&q.mask)*q.slot }

// seq of the slot of message i: sender stores i+1 last, receiver loads.
func (q *queue) seq(i uint64) *uint64 { return q.u64(q.slotAt(i)) }

func (q *queue) payload(i uint64) []byte {
	off := q.slotAt(i) + slotHeader
	return q.mem[off : off+q.maxSend : off+q.maxSend]
}

// claim takes the next receive the peer posted, or reports ok=false (RNR).
// Sender side. It returns the receive's index and buffer length.
func (q *queue) claim() (i uint64, recvLen uint32, ok bool) {
	for {
		c := atomic.LoadUint64(q.claimed())
		if c >= atomic.LoadUint64(q.posted()) { // pairs with the receiver's store in PostRecv
			return 0, 0, false
		}
		if atomic.CompareAndSwapUint64(q.claimed(), c, c+1) {
			return c, atomic.LoadUint32(q.recvLen(c)), true // stored before posted
		}
	}
}

// publish completes message i (sender side): the fields first, then the
// sequence with an atomic store that the receiver's atomic load in drain
// pairs with, so the receiver never sees a half-written message.
func (q *queue) publish(i uint64, kind, n, imm uint32) {
	s := q.slotAt(i)
	*q.u32(s + slotOffKind) = kind
	*q.u32(s + slotOffLen) = n
	*q.u32(s + slotOffImm) = imm
	atomic.StoreUint64(q.seq(i), i+1)
}

// message reads message i if it is complete (receiver side).
func (q *queue) message(i uint64) (kind, n, imm uint32, ok bool) {
	if atomic.LoadUint64(q.seq(i)) != i+1 { // pairs with publish's store
		return 0, 0, 0, false
	}
	s := q.slotAt(i)
	return *q.u32(s + slotOffKind), *q.u32(s + slotOffLen), *q.u32(s + slotOffImm), true
}
