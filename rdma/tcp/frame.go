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
//	 1 u8  flags: reqSignaled, reqAckNow (WRITE, WRITE_IMM, SEND only); other bits 0
//	 2 u16 reserved (0)
//	 4 u32 len    payload length (WRITE, WRITE_IMM, SEND) or READ length; 0 for atomics
//	 8 u64 seq    1, 2, 3, … per connection, no gaps
//	16 u64 raddr  remote virtual address (not SEND)
//	24 u32 rkey   (not SEND)
//	28 u32 imm    WRITE_IMM, SEND
//	32 u64 arg1   CAS: compare; FAA: add
//	40 u64 arg2   CAS: swap
//
// A WRITE list (opWriteList) carries a run of WRITEs to one region, which
// PostSendBatch posted together, as one frame: a ring's batch (one WRITE of
// the bodies, then a stamp per slot) or a single tick (body, stamp) is one
// header and one frame to decode and check, not one per WRITE. Its header
// is a request's, with seq the first WRITE's (the list's WRITEs are seq,
// seq+1, …), rkey theirs, imm their count (1..listMaxCount), len the bytes
// that follow (at most listMaxBytes and the peer's largest message), and
// flags, raddr, arg1, arg2 zero. Then entries, in post order, each one
// WRITE (plain) or a run of 8-byte WRITEs at a fixed stride (run):
//
//	plain:
//	 0 u64 raddr
//	 8 u32 len
//	12 u8  flags (reqSignaled, reqAckNow; other bits 0)
//	13 u8  kind: elemPlain (0)
//	14 u16 reserved (0)
//	16 len payload bytes
//
//	run (handshake version 5):
//	 0 u64 raddr of its first WRITE
//	 8 u32 stride: WRITE j lands at raddr + j*stride (8 or more; one
//	       past the top of the address space is refused, not wrapped)
//	12 u8  flags: those of its WRITEs, OR'ed
//	13 u8  kind: elemRun (1)
//	14 u16 count of its WRITEs (2..listMaxCount)
//	16 count*8 payload bytes: WRITE j's are bytes 8j..8j+7
//
// A run is how a ring batch's stamps travel (one 8-byte WRITE per slot, a
// slot apart): 8 bytes per stamp on the wire instead of 24 (a 64-tick batch
// of 96-byte slots: 6,728 bytes instead of 7,736). The list's WRITEs are
// the entries' WRITEs in order, a run's in j order, so a stamp still lands
// after the body WRITE before it and before the stamp after it.
//
// The responder checks the whole list before it applies any of it, then
// applies and answers each WRITE as if it had come alone (a remote access
// error on one leaves the ones before it applied, as separate WRITEs would).
const (
	opWriteList  rdma.Opcode = 0x40
	listElemLen              = 16
	listMaxCount             = 1 << 12
	listMaxBytes             = 64 << 10
)

// minListBytes is the fewest bytes n WRITEs take in a list: one plain
// entry, or one run.
func minListBytes(n uint32) uint32 {
	if n < 2 {
		return listElemLen
	}
	return listElemLen + 8*n
}

// List entry kinds (byte 13 of an entry).
const (
	elemPlain uint8 = 0
	elemRun   uint8 = 1
)

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
// Request flags (WRITE, WRITE_IMM, SEND only; READs and atomics are
// always answered at once). WRITEs and SENDs are acknowledged in bulk, and
// the requester says when an answer is worth a write to the socket:
//
//   - reqSignaled: answer as soon as the input runs dry. The requester
//     sets it on a signalled request posted while few requests are
//     outstanding (a poller may be waiting for just this one), not on
//     the signalled ones of a stream, which the next reqAckNow answers.
//   - reqAckNow: answer soon after applying it: when the input runs dry,
//     or once ackNowBytes of input came since the last answer, whichever
//     is first. The requester sets it on one request in an eighth of its
//     send queue, so that a stream gets room back long before its queue
//     fills; a responder that reads a stream in large chunks answers once
//     per chunk, not once per reqAckNow request in it (each answer is a
//     write(2) here and a wake-up of the requester's reaper).
//
// Whatever is left unanswered is answered when no more input came for
// ackDelay (so the tail of a stream that stopped is answered long before
// Config.AckTimeout).
// ackNowBytes bounds how much input a responder reads past a reqAckNow
// request before it answers: about a third of what a link-layer writer's
// 2048-deep send queue holds in ring ticks (1,024 single ticks of 176
// bytes on the wire, or some 2,000 batched ones of 105 with their stamps
// in runs).
const ackNowBytes = 64 << 10

const (
	reqSignaled uint8 = 1
	reqAckNow   uint8 = 2
	reqFlags          = reqSignaled | reqAckNow
)

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
	if r.flags&^reqFlags != 0 || (r.flags != 0 && !hasPayload(r.op)) {
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
	case opWriteList:
		if r.imm == 0 || r.imm > listMaxCount || r.len < minListBytes(r.imm) || r.len > listMaxBytes {
			return request{}, fmt.Errorf("%w: WRITE list of %d WRITEs in %d bytes", ErrFrame, r.imm, r.len)
		}
		unused = r.raddr != 0 || r.arg1 != 0 || r.arg2 != 0
	default:
		return request{}, fmt.Errorf("%w: unknown request op %d", ErrFrame, b[0])
	}
	if unused {
		return request{}, fmt.Errorf("%w: %s request sets fields it does not use", ErrFrame, r.op)
	}
	return r, nil
}

// listElem is one entry of a WRITE list: a plain WRITE (count 0) of len
// bytes at raddr, or a run of count 8-byte WRITEs at raddr, raddr+stride, …
// whose payload is len = 8*count bytes.
type listElem struct {
	raddr  uint64
	len    uint32
	flags  uint8
	count  uint16
	stride uint32
}

// writes is how many WRITEs e carries.
func (e *listElem) writes() uint32 { return max(1, uint32(e.count)) }

func (e *listElem) put(b []byte) {
	_ = b[listElemLen-1]
	binary.LittleEndian.PutUint64(b, e.raddr)
	if e.count == 0 {
		binary.LittleEndian.PutUint32(b[8:], e.len)
		b[12], b[13], b[14], b[15] = e.flags, elemPlain, 0, 0
		return
	}
	binary.LittleEndian.PutUint32(b[8:], e.stride)
	b[12], b[13] = e.flags, elemRun
	binary.LittleEndian.PutUint16(b[14:], e.count)
}

// nextElem decodes the entry at the start of list (the bytes after a WRITE
// list's header) and returns it, its payload and the rest of the list.
func nextElem(list []byte) (listElem, []byte, []byte, error) {
	if len(list) < listElemLen {
		return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list entry of %d bytes, want %d", ErrFrame, len(list), listElemLen)
	}
	e := listElem{raddr: binary.LittleEndian.Uint64(list), flags: list[12]}
	if e.flags&^reqFlags != 0 {
		return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list entry flags %#x", ErrFrame, e.flags)
	}
	switch list[13] {
	case elemPlain:
		e.len = binary.LittleEndian.Uint32(list[8:])
		if list[14] != 0 || list[15] != 0 {
			return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list entry reserved %x", ErrFrame, list[14:16])
		}
	case elemRun:
		e.stride = binary.LittleEndian.Uint32(list[8:])
		e.count = binary.LittleEndian.Uint16(list[14:])
		if e.count < 2 || e.count > listMaxCount || e.stride < 8 {
			return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list run of %d WRITEs at stride %d", ErrFrame, e.count, e.stride)
		}
		e.len = 8 * uint32(e.count)
	default:
		return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list entry of kind %d", ErrFrame, list[13])
	}
	rest := list[listElemLen:]
	if uint64(e.len) > uint64(len(rest)) {
		return listElem{}, nil, nil, fmt.Errorf("%w: WRITE list entry of %d bytes, %d left", ErrFrame, e.len, len(rest))
	}
	return e, rest[:e.len:e.len], rest[e.len:], nil
}

// checkList checks that list holds exactly n well-formed WRITEs.
func checkList(list []byte, n uint32) error {
	_, err := scanList(list, n)
	return err
}

// listSpan is what scanList learns of a well-formed WRITE list: the hull
// [lo, hi] of the remote bytes its WRITEs touch (a zero-length WRITE
// counts its address), unless some WRITE's end overflows (wraps), and the
// OR of their flags.
type listSpan struct {
	lo, hi uint64
	wraps  bool
	flags  uint8
}

// scanList checks that list holds entries of exactly n well-formed WRITEs,
// as checkList, and returns their span.
func scanList(list []byte, n uint32) (listSpan, error) {
	sp := listSpan{lo: ^uint64(0)}
	for got := uint32(0); got < n; {
		e, _, rest, err := nextElem(list)
		if err != nil {
			return listSpan{}, err
		}
		if got += e.writes(); got > n {
			return listSpan{}, fmt.Errorf("%w: WRITE list of %d WRITEs has more", ErrFrame, n)
		}
		list = rest
		last, end := e.raddr, e.raddr+uint64(e.len)
		if e.count > 0 {
			last = e.raddr + uint64(e.count-1)*uint64(e.stride) // < 2^44 past raddr: no overflow but a wrap of the sum
			end = last + 8
		}
		sp.wraps = sp.wraps || last < e.raddr || end < last
		sp.lo, sp.hi = min(sp.lo, e.raddr), max(sp.hi, end)
		sp.flags |= e.flags
	}
	if len(list) != 0 {
		return listSpan{}, fmt.Errorf("%w: %d bytes after the last WRITE of a list", ErrFrame, len(list))
	}
	return sp, nil
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
