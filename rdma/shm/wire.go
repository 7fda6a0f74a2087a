package shm

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/tickbus/tickbus/rdma"
)

// The control protocol runs on a SOCK_SEQPACKET unix socket, one frame per
// packet, so the kernel keeps frame boundaries and the file descriptor a
// frame carries (SCM_RIGHTS) arrives with it.
//
// Frame, version 1, little endian:
//
//	u8  version (1)
//	u8  type
//	u16 body length (exactly the length the type defines)
//	body
//
// The dialer (the requester, who will do the copies and atomics) sends
// hello; the acceptor (the target, who owns the memory) answers welcome with
// its receive queue's memfd, or refuse; then one region per region with a
// remote right (or granted), then ready. A region is a regionAdd with the
// memfd behind its first bytes, then, if more memfds back it (memory in
// grant units: rdma.MemoryConfig), one regionUnit per further memfd, each
// mapped from its file offset 0 right after the one before; only the
// memfds the region or its grant covers are sent. After that the acceptor
// pushes regions and regionDel as its device registers and deregisters
// memory, and the dialer answers each with ack once the mapping is in place
// or gone.
//
// Version 2 added regionUnit and regionAdd's unit count.
const (
	wireVersion  = 2
	frameHeader  = 4
	maxFrameSize = frameHeader + 64
)

type frameType uint8

const (
	frameHello      frameType = 1 // dialer → acceptor
	frameWelcome    frameType = 2 // acceptor → dialer, carries the queue memfd
	frameRefuse     frameType = 3 // acceptor → dialer, then close
	frameRegionAdd  frameType = 4 // acceptor → dialer, carries the region memfd
	frameRegionDel  frameType = 5 // acceptor → dialer
	frameReady      frameType = 6 // acceptor → dialer: the snapshot is complete
	frameAck        frameType = 7 // dialer → acceptor: regionAdd/regionDel applied
	frameRegionUnit frameType = 8 // acceptor → dialer, after regionAdd: one more memfd of the region
)

// maxUnits bounds the memfds of one region a peer may have us map.
const maxUnits = 4096

var bodyLen = [...]int{
	frameHello:      4 + 8 + 4 + 8,
	frameWelcome:    4 + 4 + 4 + 8,
	frameRefuse:     1,
	frameRegionAdd:  4 + 4 + 8 + 8 + 8 + 4,
	frameRegionDel:  4,
	frameReady:      0,
	frameAck:        1 + 4,
	frameRegionUnit: 4 + 8,
}

// carriesFD reports whether a frame of type t comes with exactly one fd.
func (t frameType) carriesFD() bool {
	return t == frameWelcome || t == frameRegionAdd || t == frameRegionUnit
}

func (t frameType) String() string {
	switch t {
	case frameHello:
		return "hello"
	case frameWelcome:
		return "welcome"
	case frameRefuse:
		return "refuse"
	case frameRegionAdd:
		return "region-add"
	case frameRegionDel:
		return "region-del"
	case frameReady:
		return "ready"
	case frameAck:
		return "ack"
	case frameRegionUnit:
		return "region-unit"
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}

// Refuse reasons.
const (
	refuseUnknownQP uint8 = 1 // no such QPN, or another incarnation (nonce)
	refuseState     uint8 = 2 // the QP is closed, in error, or taken by another peer
)

// frame is a decoded control frame. Only the fields of its type are set.
type frame struct {
	typ frameType

	// hello
	dstQPN   uint32
	dstNonce uint64
	srcQPN   uint32
	srcNonce uint64

	// welcome: the receive queue's geometry and the memfd's size
	qCap     uint32
	qMaxSend uint32
	qSlot    uint32
	qSize    uint64

	// refuse
	reason uint8

	// regionAdd / regionDel / ack / regionUnit
	rkey    uint32
	access  rdma.Access
	addr    uint64
	length  uint64 // regionAdd: the region's; regionUnit: the bytes of it this memfd backs
	fileOff uint64 // offset in the first memfd of the region's first byte
	units   uint32 // memfds the region comes with: this frame's and units-1 regionUnit
	acked   frameType
}

func (f *frame) appendBinary(b []byte) []byte {
	b = append(b, wireVersion, byte(f.typ))
	b = binary.LittleEndian.AppendUint16(b, uint16(bodyLen[f.typ]))
	le := binary.LittleEndian
	switch f.typ {
	case frameHello:
		b = le.AppendUint32(b, f.dstQPN)
		b = le.AppendUint64(b, f.dstNonce)
		b = le.AppendUint32(b, f.srcQPN)
		b = le.AppendUint64(b, f.srcNonce)
	case frameWelcome:
		b = le.AppendUint32(b, f.qCap)
		b = le.AppendUint32(b, f.qMaxSend)
		b = le.AppendUint32(b, f.qSlot)
		b = le.AppendUint64(b, f.qSize)
	case frameRefuse:
		b = append(b, f.reason)
	case frameRegionAdd:
		b = le.AppendUint32(b, f.rkey)
		b = le.AppendUint32(b, uint32(f.access))
		b = le.AppendUint64(b, f.addr)
		b = le.AppendUint64(b, f.length)
		b = le.AppendUint64(b, f.fileOff)
		b = le.AppendUint32(b, f.units)
	case frameRegionUnit:
		b = le.AppendUint32(b, f.rkey)
		b = le.AppendUint64(b, f.length)
	case frameRegionDel:
		b = le.AppendUint32(b, f.rkey)
	case frameAck:
		b = append(b, byte(f.acked))
		b = le.AppendUint32(b, f.rkey)
	}
	return b
}

// decodeFrame decodes and validates one frame. Anything of another version,
// of an unknown type, of the wrong length or with a field out of range is an
// error wrapping rdma.ErrMalformed or rdma.ErrUnknownVersion.
func decodeFrame(b []byte) (frame, error) {
	var f frame
	if len(b) < frameHeader {
		return f, fmt.Errorf("%w: shm frame of %d bytes, want at least %d", rdma.ErrMalformed, len(b), frameHeader)
	}
	if b[0] != wireVersion {
		return f, fmt.Errorf("%w: shm control version %d, want %d", rdma.ErrUnknownVersion, b[0], wireVersion)
	}
	f.typ = frameType(b[1])
	if f.typ == 0 || int(f.typ) >= len(bodyLen) {
		return f, fmt.Errorf("%w: shm frame type %d", rdma.ErrMalformed, b[1])
	}
	n := int(binary.LittleEndian.Uint16(b[2:4]))
	body := b[frameHeader:]
	if n != bodyLen[f.typ] || len(body) != n {
		return f, fmt.Errorf("%w: shm %s frame: body %d bytes, header says %d, want %d",
			rdma.ErrMalformed, f.typ, len(body), n, bodyLen[f.typ])
	}
	le := binary.LittleEndian
	switch f.typ {
	case frameHello:
		f.dstQPN = le.Uint32(body[0:])
		f.dstNonce = le.Uint64(body[4:])
		f.srcQPN = le.Uint32(body[12:])
		f.srcNonce = le.Uint64(body[16:])
		if f.dstQPN == 0 {
			return f, fmt.Errorf("%w: shm hello for QPN 0", rdma.ErrMalformed)
		}
	case frameWelcome:
		f.qCap = le.Uint32(body[0:])
		f.qMaxSend = le.Uint32(body[4:])
		f.qSlot = le.Uint32(body[8:])
		f.qSize = le.Uint64(body[12:])
		if err := checkQueueGeometry(f.qCap, f.qMaxSend, f.qSlot, f.qSize); err != nil {
			return f, err
		}
	case frameRefuse:
		f.reason = body[0]
	case frameRegionAdd:
		f.rkey = le.Uint32(body[0:])
		f.access = rdma.Access(le.Uint32(body[4:]))
		f.addr = le.Uint64(body[8:])
		f.length = le.Uint64(body[16:])
		f.fileOff = le.Uint64(body[24:])
		f.units = le.Uint32(body[32:])
		switch {
		case f.units == 0 || f.units > maxUnits:
			return f, fmt.Errorf("%w: shm region of %d memfds, want 1..%d", rdma.ErrMalformed, f.units, maxUnits)
		case f.rkey == 0:
			return f, fmt.Errorf("%w: shm region with rkey 0", rdma.ErrMalformed)
		case f.access&^(rdma.AccessRemote|rdma.AccessLocalWrite) != 0 || f.access&rdma.AccessRemote == 0:
			return f, fmt.Errorf("%w: shm region access %#x", rdma.ErrMalformed, uint32(f.access))
		case f.length == 0 || f.length > maxRegion:
			return f, fmt.Errorf("%w: shm region of %d bytes, want 1..%d", rdma.ErrMalformed, f.length, uint64(maxRegion))
		case f.addr+f.length < f.addr:
			return f, fmt.Errorf("%w: shm region at %#x of %d bytes wraps", rdma.ErrMalformed, f.addr, f.length)
		case f.fileOff > maxRegion || f.fileOff%pageSize != f.addr%pageSize:
			return f, fmt.Errorf("%w: shm region file offset %#x for address %#x", rdma.ErrMalformed, f.fileOff, f.addr)
		}
	case frameRegionUnit:
		f.rkey = le.Uint32(body[0:])
		f.length = le.Uint64(body[4:])
		switch {
		case f.rkey == 0:
			return f, fmt.Errorf("%w: shm region unit with rkey 0", rdma.ErrMalformed)
		case f.length == 0 || f.length > maxRegion:
			return f, fmt.Errorf("%w: shm region unit of %d bytes, want 1..%d", rdma.ErrMalformed, f.length, uint64(maxRegion))
		}
	case frameRegionDel:
		f.rkey = le.Uint32(body[0:])
		if f.rkey == 0 {
			return f, fmt.Errorf("%w: shm region-del of rkey 0", rdma.ErrMalformed)
		}
	case frameAck:
		f.acked = frameType(body[0])
		f.rkey = le.Uint32(body[1:])
		if f.acked != frameRegionAdd && f.acked != frameRegionDel {
			return f, fmt.Errorf("%w: shm ack of %s", rdma.ErrMalformed, f.acked)
		}
	}
	return f, nil
}

// checkQueueGeometry validates a receive queue's geometry as announced by
// its owner: the size must hold the layout computed from the other fields.
func checkQueueGeometry(qcap, maxSend, slot uint32, size uint64) error {
	switch {
	case qcap == 0 || qcap > maxQPDepth || bits.OnesCount32(qcap) != 1:
		return fmt.Errorf("%w: shm queue capacity %d, want a power of two up to %d", rdma.ErrMalformed, qcap, maxQPDepth)
	case maxSend > maxSendLimit:
		return fmt.Errorf("%w: shm queue max send %d, want at most %d", rdma.ErrMalformed, maxSend, maxSendLimit)
	case slot != slotSize(int(maxSend)):
		return fmt.Errorf("%w: shm queue slot of %d bytes, want %d", rdma.ErrMalformed, slot, slotSize(int(maxSend)))
	case size < uint64(queueBytes(int(qcap), int(maxSend))) || size > uint64(queueBytes(int(qcap), int(maxSend)))+pageSize:
		return fmt.Errorf("%w: shm queue of %d bytes, want %d", rdma.ErrMalformed, size, queueBytes(int(qcap), int(maxSend)))
	}
	return nil
}
