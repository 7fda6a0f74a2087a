package tick

import "unsafe"

// Size is the encoded length of a tick in bytes.
const Size = 56

// Version is the wire version this package writes and reads.
const Version = 1

// MessageType is the message type a tick travels under in a ring slot.
// Other messages use other types.
const MessageType = 1

// Offsets of each field in the wire form.
const (
	offVersion    = 0
	offKind       = 1
	offFlags      = 2
	offVenue      = 4
	offInstrument = 8
	offPrice      = 16
	offSize       = 24
	offExchTime   = 32
	offPubTime    = 40
	offExchSeq    = 48
)

// wire mirrors the byte layout one to one. It is never used to read memory;
// it exists so the compiler checks the offsets and the size above.
type wire struct {
	version    uint8
	kind       uint8
	flags      uint16
	venue      [4]byte
	instrument uint64
	price      int64
	size       uint64
	exchTime   int64
	pubTime    int64
	exchSeq    uint64
}

// Compile-time checks: each constant equals the struct's offset, and the
// size matches both ways round.
var (
	_ [Size - unsafe.Sizeof(wire{})]byte
	_ [unsafe.Sizeof(wire{}) - Size]byte

	_ [offKind - unsafe.Offsetof(wire{}.kind)]byte
	_ [unsafe.Offsetof(wire{}.kind) - offKind]byte
	_ [offFlags - unsafe.Offsetof(wire{}.flags)]byte
	_ [unsafe.Offsetof(wire{}.flags) - offFlags]byte
	_ [offVenue - unsafe.Offsetof(wire{}.venue)]byte
	_ [unsafe.Offsetof(wire{}.venue) - offVenue]byte
	_ [offInstrument - unsafe.Offsetof(wire{}.instrument)]byte
	_ [unsafe.Offsetof(wire{}.instrument) - offInstrument]byte
	_ [offPrice - unsafe.Offsetof(wire{}.price)]byte
	_ [unsafe.Offsetof(wire{}.price) - offPrice]byte
	_ [offSize - unsafe.Offsetof(wire{}.size)]byte
	_ [unsafe.Offsetof(wire{}.size) - offSize]byte
	_ [offExchTime - unsafe.Offsetof(wire{}.exchTime)]byte
	_ [unsafe.Offsetof(wire{}.exchTime) - offExchTime]byte
	_ [offPubTime - unsafe.Offsetof(wire{}.pubTime)]byte
	_ [unsafe.Offsetof(wire{}.pubTime) - offPubTime]byte
	_ [offExchSeq - unsafe.Offsetof(wire{}.exchSeq)]byte
	_ [unsafe.Offsetof(wire{}.exchSeq) - offExchSeq]byte
	_ = wire{}.version
)
