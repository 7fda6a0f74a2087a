package tcp

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The handshake opens a data connection. The dialling side (the requester)
// names the target queue pair by number and nonce, and itself; the accepting
// side answers with a status. Both directions are bounded by
// Config.ConnectTimeout.
//
// Hello, 36 bytes then host id (0..255 bytes), little endian:
//
//	 0 [4]byte magic "TBQP"
//	 4 u8  version (1)
//	 5 u8  len, host id
//	 6 u16 reserved (0)
//	 8 u32 target QPN
//	12 u32 source QPN
//	16 u64 target nonce
//	24 u64 source nonce
//	32 u32 the source's largest message
//
// Reply, 12 bytes:
//
//	0 [4]byte magic "TBQP"
//	4 u8  version (1)
//	5 u8  status (hsOK, …)
//	6 u16 reserved (0)
//	8 u32 the target's largest message
const (
	handshakeVersion = 1
	helloLen         = 36
	replyLen         = 12
)

var magic = [4]byte{'T', 'B', 'Q', 'P'}

// Handshake statuses.
const (
	hsOK         uint8 = 0
	hsNotFound   uint8 = 1 // no queue pair of that number and nonce
	hsRefused    uint8 = 2 // the queue pair is closed, in ERR, or connected elsewhere
	hsBadVersion uint8 = 3
)

type hello struct {
	host               string
	dstQPN, srcQPN     uint32
	dstNonce, srcNonce uint64
	maxMsg             uint32
}

func (h *hello) marshal() []byte {
	b := make([]byte, helloLen, helloLen+len(h.host))
	copy(b, magic[:])
	b[4] = handshakeVersion
	b[5] = byte(len(h.host))
	binary.LittleEndian.PutUint32(b[8:], h.dstQPN)
	binary.LittleEndian.PutUint32(b[12:], h.srcQPN)
	binary.LittleEndian.PutUint64(b[16:], h.dstNonce)
	binary.LittleEndian.PutUint64(b[24:], h.srcNonce)
	binary.LittleEndian.PutUint32(b[32:], h.maxMsg)
	return append(b, h.host...)
}

// readHello reads and checks a hello. A hello of another version returns
// ErrHandshakeVersion so the caller can answer hsBadVersion.
func readHello(r io.Reader) (hello, error) {
	var b [helloLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return hello{}, fmt.Errorf("%w: hello: %w", ErrHandshake, err)
	}
	if [4]byte(b[:4]) != magic {
		return hello{}, fmt.Errorf("%w: bad magic %q", ErrHandshake, b[:4])
	}
	if b[4] != handshakeVersion {
		return hello{}, fmt.Errorf("%w: version %d, want %d", ErrHandshakeVersion, b[4], handshakeVersion)
	}
	if b[6] != 0 || b[7] != 0 {
		return hello{}, fmt.Errorf("%w: reserved hello bytes %x", ErrHandshake, b[6:8])
	}
	h := hello{
		dstQPN:   binary.LittleEndian.Uint32(b[8:]),
		srcQPN:   binary.LittleEndian.Uint32(b[12:]),
		dstNonce: binary.LittleEndian.Uint64(b[16:]),
		srcNonce: binary.LittleEndian.Uint64(b[24:]),
		maxMsg:   binary.LittleEndian.Uint32(b[32:]),
	}
	if h.maxMsg == 0 {
		return hello{}, fmt.Errorf("%w: peer's largest message is 0", ErrHandshake)
	}
	host := make([]byte, b[5])
	if _, err := io.ReadFull(r, host); err != nil {
		return hello{}, fmt.Errorf("%w: hello host id: %w", ErrHandshake, err)
	}
	h.host = string(host)
	return h, nil
}

func marshalReply(status uint8, maxMsg uint32) []byte {
	b := make([]byte, replyLen)
	copy(b, magic[:])
	b[4] = handshakeVersion
	b[5] = status
	binary.LittleEndian.PutUint32(b[8:], maxMsg)
	return b
}

// decodeReply checks a reply and returns its status and the target's
// largest message.
func decodeReply(b []byte) (uint8, uint32, error) {
	if len(b) != replyLen {
		return 0, 0, fmt.Errorf("%w: reply of %d bytes, want %d", ErrHandshake, len(b), replyLen)
	}
	if [4]byte(b[:4]) != magic {
		return 0, 0, fmt.Errorf("%w: bad reply magic %q", ErrHandshake, b[:4])
	}
	if b[4] != handshakeVersion {
		return 0, 0, fmt.Errorf("%w: reply version %d, want %d", ErrHandshakeVersion, b[4], handshakeVersion)
	}
	if b[6] != 0 || b[7] != 0 || b[5] > hsBadVersion {
		return 0, 0, fmt.Errorf("%w: malformed reply %x", ErrHandshake, b)
	}
	max := binary.LittleEndian.Uint32(b[8:])
	if b[5] == hsOK && max == 0 {
		return 0, 0, fmt.Errorf("%w: peer's largest message is 0", ErrHandshake)
	}
	return b[5], max, nil
}
