package tcp

import (
	"encoding/binary"
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Data-connection frames. Every connection carries one direction of one
// queue pair: the requester writes requests, the responder writes responses.
// All integers are little endian; every field an op does not use must be
// zero, so that a decoded frame re-encodes to the same bytes.
//
// Request, 48 bytes, then len payload bytes for WRITE, WRITE_WITH_IMM, SEND:
//
//	 0 u8  op (rdma.OpWrite … rdma.OpSend)
//	 1 u8  flags: reqSignaled (WRITE, WRITE_IMM, SEND only); other bits 0
//	 2 u16 reserved (0)
//	 4 u32 len    payload length (WRITE, WRITE_IMM, SEND) or READ length; 0 for atomics
//	 8 u64 seq    1, 2, 3, … per connection, no gaps
//	16 u64 raddr  remote virtual address (not SEND)
//	24 u32 rkey   (not SEND)
//	28 u32 imm    WRITE_IMM, SEND
//	32 u64 arg1   CAS: compare; FAA: add
//	40 u64 arg2   CAS: swap
//
// Response, 24 bytes, then len bytes for a READ response:
//
//	 0 u8  kind (respAck, respNak, respRead, respAtomic)
//	 1 u8  status (NAK: an rdma.Status other than success; otherwise 0)
//	 2 u16 reserved (0)
//	 4 u32 len    READ response: bytes that follow; otherwise 0
//	 8 u64 seq    ACK: every request up to seq succeeded; otherwise the request answered
//	16 u64 value  atomic response: the original value; otherwise 0
//
// A response for seq also acknowledges every earlier request, because the
// responder applies requests in order.
//
// reqSignaled marks a request whose completion the requester's user polls
// for: the responder answers it as soon as its input runs dry. WRITEs and
// SENDs without it are acknowledged in bulk: every ackEvery, with the next
// signalled one, or when no more input came for ackDelay (so the tail of a
// stream that stopped is answered long before Config.AckTimeout). READs and atomics are always answered at once.
const reqSignaled uint8 = 1
const (
	reqHeaderLen  = 48
	respHeaderLen = 24
)

const (
	respAck    uint8 = 0x81
	respNak    uint8 = 0x82
	respRead   uint8 = 0x83
	respAtomic uint8 = 0x84
)

type request struct {
	op    rdma.Opcode
	flags uint8
	len   uint32
	seq   uint64
	raddr uint64
	rkey  uint32
	imm   uint32
	arg1  uint64
	arg2  uint64
}

type response struct {
	kind   uint8
	status rdma.Status
	len    uint32
	seq    uint64
	value  uint64
}

// hasPayload reports whether a request of op carries len payload bytes.
func hasPayload(op rdma.Opcode) bool {
	return op == rdma.OpWrite || op == rdma.OpWriteImm || op == rdma.OpSend
}

// put writes the header of r into b[:reqHeaderLen].
func (r *request) put(b []byte) {
	_ = b[reqHeaderLen-1]
	b[0] = byte(r.op)
	b[1], b[2], b[3] = r.flags, 0, 0
	binary.LittleEndian.PutUint32(b[4:], r.len)
	binary.LittleEndian.PutUint64(b[8:], r.seq)
	binary.LittleEndian.PutUint64(b[16:], r.raddr)
	binary.LittleEndian.PutUint32(b[24:], r.rkey)
	binary.LittleEndian.PutUint32(b[28:], r.imm)
	binary.LittleEndian.PutUint64(b[32:], r.arg1)
	binary.LittleEndian.PutUint64(b[40:], r.arg2)
}

// decodeRequest checks and decodes a request header. maxMsg bounds len.
func decodeRequest(b []byte, maxMsg uint32) (request, error) {
	if len(b) != reqHeaderLen {
		return request{}, fmt.Errorf("%w: request header of %d bytes, want %d", ErrFrame, len(b), reqHeaderLen)
	}
	r := request{
		op:    rdma.Opcode(b[0]),
		flags: b[1],
		len:   binary.LittleEndian.Uint32(b[4:]),
		seq:   binary.LittleEndian.Uint64(b[8:]),
		raddr: binary.LittleEndian.Uint64(b[16:]),
		rkey:  binary.LittleEndian.Uint32(b[24:]),
		imm:   binary.LittleEndian.Uint32(b[28:]),
		arg1:  binary.LittleEndian.Uint64(b[32:]),
		arg2:  binary.LittleEndian.Uint64(b[40:]),
	}
	if b[2] != 0 || b[3] != 0 {
		return request{}, fmt.Errorf("%w: reserved request bytes %x", ErrFrame, b[2:4])
	}
	if r.flags&^reqSignaled != 0 || (r.flags != 0 && !hasPayload(r.op)) {
		return request{}, fmt.Errorf("%w: request flags %#x on %s", ErrFrame, r.flags, r.op)
	}
	if r.seq == 0 {
		return request{}, fmt.Errorf("%w: request seq 0", ErrFrame)
	}
	if r.len > maxMsg {
		return request{}, fmt.Errorf("%w: request len %d over limit %d", ErrFrame, r.len, maxMsg)
	}
	unused := false
	switch r.op {
	case rdma.OpWrite:
		unused = r.imm != 0 || r.arg1 != 0 || r.arg2 != 0
	case rdma.OpWriteImm:
		unused = r.arg1 != 0 || r.arg2 != 0
	case rdma.OpRead:
		unused = r.imm != 0 || r.arg1 != 0 || r.arg2 != 0
	case rdma.OpCompareAndSwap:
		unused = r.len != 0 || r.imm != 0
	case rdma.OpFetchAndAdd:
		unused = r.len != 0 || r.imm != 0 || r.arg2 != 0
	case rdma.OpSend:
		unused = r.raddr != 0 || r.rkey != 0 || r.arg1 != 0 || r.arg2 != 0
	default:
		return request{}, fmt.Errorf("%w: unknown request op %d", ErrFrame, b[0])
	}
	if unused {
		return request{}, fmt.Errorf("%w: %s request sets fields it does not use", ErrFrame, r.op)
	}
	return r, nil
}

func (r *response) put(b []byte) {
	_ = b[respHeaderLen-1]
	b[0] = r.kind
	b[1] = byte(r.status)
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:], r.len)
	binary.LittleEndian.PutUint64(b[8:], r.seq)
	binary.LittleEndian.PutUint64(b[16:], r.value)
}

// decodeResponse checks and decodes a response header. maxMsg bounds len.
func decodeResponse(b []byte, maxMsg uint32) (response, error) {
	if len(b) != respHeaderLen {
		return response{}, fmt.Errorf("%w: response header of %d bytes, want %d", ErrFrame, len(b), respHeaderLen)
	}
	r := response{
		kind:   b[0],
		status: rdma.Status(b[1]),
		len:    binary.LittleEndian.Uint32(b[4:]),
		seq:    binary.LittleEndian.Uint64(b[8:]),
		value:  binary.LittleEndian.Uint64(b[16:]),
	}
	if b[2] != 0 || b[3] != 0 {
		return response{}, fmt.Errorf("%w: reserved response bytes %x", ErrFrame, b[2:4])
	}
	if r.seq == 0 {
		return response{}, fmt.Errorf("%w: response seq 0", ErrFrame)
	}
	bad := false
	switch r.kind {
	case respAck:
		bad = r.status != 0 || r.len != 0 || r.value != 0
	case respNak:
		bad = !nakStatus(r.status) || r.len != 0 || r.value != 0
	case respRead:
		bad = r.status != 0 || r.len > maxMsg || r.value != 0
	case respAtomic:
		bad = r.status != 0 || r.len != 0
	default:
		return response{}, fmt.Errorf("%w: unknown response kind %#x", ErrFrame, r.kind)
	}
	if bad {
		return response{}, fmt.Errorf("%w: malformed response kind %#x", ErrFrame, r.kind)
	}
	return r, nil
}

// nakStatus reports whether a responder may answer with s.
func nakStatus(s rdma.Status) bool {
	switch s {
	case rdma.StatusRemoteAccess, rdma.StatusRemoteInvalidRequest, rdma.StatusRemoteOp, rdma.StatusRNRRetryExceeded:
		return true
	}
	return false
}
