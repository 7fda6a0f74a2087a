package tcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// The handshake opens a data connection. The dialling side (the requester)
// names the target queue pair by number and itself, and proves it knows the
// target's nonce, a per-queue-pair secret that only the authenticated
// control plane carried (in the target's Endpoint), without sending it: the
// hello carries an HMAC-SHA256 keyed by the nonce. The accepting side
// answers with a status and, when it accepts, an HMAC keyed by the same
// nonce over the hello, so the requester knows it reached the queue pair
// the control plane named. Both directions are bounded by
// Config.ConnectTimeout.
//
// Hello, 36 bytes then host id (0..255 bytes), little endian:
//
//	 0 [4]byte magic "TBQP"
//	 4 u8  version (5)
//	 5 u8  len, host id
//	 6 u16 reserved (0)
//	 8 u32 target QPN
//	12 u32 source QPN
//	16 [8]byte MAC: HMAC-SHA256(target nonce, "TBQP hello" + bytes 8..15, 24..35 + host id), first 8 bytes
//	24 u64 source nonce
//	32 u32 the source's largest message
//
// Reply, 20 bytes:
//
//	0 [4]byte magic "TBQP"
//	4 u8  version (5)
//	5 u8  status (hsOK, …)
//	6 u16 reserved (0)
//	8 u32 the target's largest message
//	12 [8]byte MAC (hsOK only, else 0): HMAC-SHA256(target nonce, "TBQP reply" + bytes 5..11 + the hello's MAC), first 8 bytes
const (
	handshakeVersion = 5 // 3: request flags (frame.go); 4: reqAckNow, no ACK every 64; 5: runs in WRITE lists
	helloLen         = 36
	replyLen         = 20
)

var magic = [4]byte{'T', 'B', 'Q', 'P'}

// versionName names a handshake version this one refuses, so that an
// operator mixing builds reads what the peer lacks.
func versionName(v uint8) string {
	switch v {
	case 4:
		return "v4: WRITE lists without runs of 8-byte WRITEs"
	case 3:
		return "v3: request flags without reqAckNow"
	}
	if v < handshakeVersion {
		return "an older build"
	}
	return "a newer build"
}

// Handshake statuses.
const (
	hsOK         uint8 = 0
	hsNotFound   uint8 = 1 // no queue pair of that number and nonce
	hsRefused    uint8 = 2 // the queue pair is closed, in ERR, or connected elsewhere
	hsBadVersion uint8 = 3
)

type hello struct {
	host           string
	dstQPN, srcQPN uint32
	mac            [8]byte // proves the target's nonce; see sign
	srcNonce       uint64
	maxMsg         uint32
}

func (h *hello) marshal() []byte {
	b := make([]byte, helloLen, helloLen+len(h.host))
	copy(b, magic[:])
	b[4] = handshakeVersion
	b[5] = byte(len(h.host))
	binary.LittleEndian.PutUint32(b[8:], h.dstQPN)
	binary.LittleEndian.PutUint32(b[12:], h.srcQPN)
	copy(b[16:24], h.mac[:])
	binary.LittleEndian.PutUint64(b[24:], h.srcNonce)
	binary.LittleEndian.PutUint32(b[32:], h.maxMsg)
	return append(b, h.host...)
}

// handshakeMAC is HMAC-SHA256 keyed by nonce over label and parts,
// truncated to 8 bytes.
func handshakeMAC(nonce uint64, label string, parts ...[]byte) [8]byte {
	var k [8]byte
	binary.LittleEndian.PutUint64(k[:], nonce)
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write(p)
	}
	var out [8]byte
	copy(out[:], m.Sum(nil))
	return out
}

// helloMAC is the MAC a hello for a target of nonce carries.
func (h *hello) helloMAC(nonce uint64) [8]byte {
	b := h.marshal()
	return handshakeMAC(nonce, "TBQP hello", b[8:16], b[24:])
}

// sign sets the hello's MAC for a target whose nonce is nonce.
func (h *hello) sign(nonce uint64) { h.mac = h.helloMAC(nonce) }

// verify reports whether the hello proves the nonce (constant time).
func (h *hello) verify(nonce uint64) bool {
	want := h.helloMAC(nonce)
	return hmac.Equal(want[:], h.mac[:])
}

// replyMAC is the MAC of an hsOK reply to h from the target of nonce.
func replyMAC(nonce uint64, status uint8, maxMsg uint32, h *hello) [8]byte {
	var b [7]byte
	b[0] = status
	binary.LittleEndian.PutUint32(b[3:], maxMsg)
	return handshakeMAC(nonce, "TBQP reply", b[:], h.mac[:])
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
		return hello{}, fmt.Errorf("%w: version %d (%s), want %d", ErrHandshakeVersion, b[4], versionName(b[4]), handshakeVersion)
	}
	if b[6] != 0 || b[7] != 0 {
		return hello{}, fmt.Errorf("%w: reserved hello bytes %x", ErrHandshake, b[6:8])
	}
	h := hello{
		dstQPN:   binary.LittleEndian.Uint32(b[8:]),
		srcQPN:   binary.LittleEndian.Uint32(b[12:]),
		mac:      [8]byte(b[16:24]),
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

func marshalReply(status uint8, maxMsg uint32, mac [8]byte) []byte {
	b := make([]byte, replyLen)
	copy(b, magic[:])
	b[4] = handshakeVersion
	b[5] = status
	binary.LittleEndian.PutUint32(b[8:], maxMsg)
	copy(b[12:], mac[:])
	return b
}

// decodeReply checks a reply and returns its status, the target's largest
// message and its MAC (see replyMAC; zero unless hsOK).
func decodeReply(b []byte) (uint8, uint32, [8]byte, error) {
	var mac [8]byte
	if len(b) != replyLen {
		return 0, 0, mac, fmt.Errorf("%w: reply of %d bytes, want %d", ErrHandshake, len(b), replyLen)
	}
	if [4]byte(b[:4]) != magic {
		return 0, 0, mac, fmt.Errorf("%w: bad reply magic %q", ErrHandshake, b[:4])
	}
	if b[4] != handshakeVersion {
		return 0, 0, mac, fmt.Errorf("%w: reply version %d (%s), want %d", ErrHandshakeVersion, b[4], versionName(b[4]), handshakeVersion)
	}
	if b[6] != 0 || b[7] != 0 || b[5] > hsBadVersion {
		return 0, 0, mac, fmt.Errorf("%w: malformed reply %x", ErrHandshake, b)
	}
	max := binary.LittleEndian.Uint32(b[8:])
	if b[5] == hsOK && max == 0 {
		return 0, 0, mac, fmt.Errorf("%w: peer's largest message is 0", ErrHandshake)
	}
	mac = [8]byte(b[12:20])
	if b[5] != hsOK && mac != ([8]byte{}) {
		return 0, 0, mac, fmt.Errorf("%w: MAC on a refusal %x", ErrHandshake, b)
	}
	return b[5], max, mac, nil
}
