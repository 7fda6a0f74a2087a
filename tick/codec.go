package tick

import "encoding/binary"

var le = binary.LittleEndian

// The codec validates a tick with one word of bit arithmetic and one branch
// (wireBad): the first 8 bytes of the wire form (version, kind, flags,
// venue) are one little-endian word, the instrument the next. Only when
// that word says "bad" does a cold path (checkErr, Validate) find which
// field it was, so the error names it. Encode, Check and Decode inline
// wireBad; -gcflags=-m shows it.

// word0 packs version, kind, flags and venue as bytes 0-7 of the wire form
// hold them.
func word0(t *Tick) uint64 {
	return Version | uint64(t.Kind)<<8 | uint64(t.Flags)<<16 | uint64(le.Uint32(t.Venue[:]))<<32
}

// wireBad is non-zero if the first word w0 (bytes 0-7) and the instrument
// do not make a version-1 tick: a version other than 1, a kind outside
// 1..3, an undefined flag, a venue that is neither all zero nor four
// upper-case ASCII letters or digits, or a zero instrument.
//
// It tests the eight bytes of w0 at once, each against its own range
// (SWAR): with a byte's high bit cleared, adding 0x80-c to it sets the high
// bit iff the byte is >= c, and no sum carries into the next byte (every
// byte stays below 0x80+0x80). A byte is in range if it is >= its low bound
// and not >= its high bound + 1, in one of two ranges (a venue byte: a
// letter or a digit); a byte with its high bit set is in no range.
// Branch-free: the caller's one branch is on the result.
func wireBad(w0, instrument uint64) uint64 {
	x := w0 &^ highs
	in := (x+geLo)&^(x+gtHi) | (x+geDigit)&^(x+gtDigit)
	bad := (^in | w0) & highs
	noVenue := ^(w0>>32 | -(w0 >> 32)) >> 63 // 1 if the venue is all zero: allowed
	noInstrument := ^(instrument | -instrument) >> 63
	return bad&^(-noVenue<<32) | noInstrument
}

// The per-byte bounds of wireBad, byte 0 (version) in the lowest bits.
const (
	highs = 0x8080808080808080
	ones  = 0x01010101 // four bytes, shifted to the venue's
	// venue bytes: 'A'..'Z' here, '0'..'9' in the digit pair.
	geLo = (0x80-Version)<<0 | (0x80-uint64(Trade))<<8 | 0x80<<16 | 0x80<<24 | (0x80-'A')*ones<<32
	gtHi = (0x80-Version-1)<<0 | (0x80-uint64(Ask)-1)<<8 |
		(0x80-(uint64(FlagsDefined)&0xff)-1)<<16 | (0x80-(uint64(FlagsDefined)>>8)-1)<<24 |
		(0x80-'Z'-1)*ones<<32
	// No digit range for bytes 0-3: adding 0 never sets the high bit.
	geDigit = (0x80 - '0') * ones << 32
	gtDigit = (0x80 - '9' - 1) * ones << 32
)

// Encode writes t into dst[:Size] and returns Size. It refuses an invalid
// tick (ErrInvalid) or a short dst (ErrShortBuffer), writing nothing. It does
// not allocate.
func Encode(dst []byte, t *Tick) (int, error) {
	if len(dst) < Size {
		return 0, errShort
	}
	w0 := word0(t)
	if wireBad(w0, t.Instrument) != 0 {
		return 0, t.Validate()
	}
	put(dst[:Size], w0, t)
	return Size, nil
}

// put writes a validated tick whose first word is w0.
func put(b []byte, w0 uint64, t *Tick) {
	_ = b[Size-1] // one bounds check
	le.PutUint64(b[0:], w0)
	le.PutUint64(b[offInstrument:], t.Instrument)
	le.PutUint64(b[offPrice:], uint64(t.Price))
	le.PutUint64(b[offSize:], t.Size)
	le.PutUint64(b[offExchTime:], uint64(t.ExchTime))
	le.PutUint64(b[offPubTime:], uint64(t.PubTime))
	le.PutUint64(b[offExchSeq:], t.ExchSeq)
}

// Decode reads a tick from src, which must be exactly Size bytes (a ring
// slot's payload). Anything else is an error wrapping ErrMalformed and t is
// left unchanged. It does not allocate.
func Decode(src []byte, t *Tick) error {
	if len(src) != Size {
		return errLength
	}
	b := src[:Size:Size] // one bounds check for every load below
	w0, instrument := le.Uint64(b[0:]), le.Uint64(b[offInstrument:])
	if wireBad(w0, instrument) != 0 {
		return checkErr(b)
	}
	t.Instrument = instrument
	t.Kind = Kind(w0 >> 8)
	t.Flags = Flags(w0 >> 16)
	le.PutUint32(t.Venue[:], uint32(w0>>32))
	t.Price = int64(le.Uint64(b[offPrice:]))
	t.Size = le.Uint64(b[offSize:])
	t.ExchTime = int64(le.Uint64(b[offExchTime:]))
	t.PubTime = int64(le.Uint64(b[offPubTime:]))
	t.ExchSeq = le.Uint64(b[offExchSeq:])
	return nil
}

// Check reports whether src is a well-formed version-1 tick.
func Check(src []byte) error {
	if len(src) != Size {
		return errLength
	}
	b := src[:Size:Size]
	if wireBad(le.Uint64(b[0:]), le.Uint64(b[offInstrument:])) != 0 {
		return checkErr(b)
	}
	return nil
}

// checkErr names what is wrong with a tick wireBad refused (the cold path).
func checkErr(src []byte) error {
	switch {
	case src[offVersion] != Version:
		return errVersion
	case !Kind(src[offKind]).Valid():
		return errWireKind
	case Flags(le.Uint16(src[offFlags:]))&^FlagsDefined != 0:
		return errWireFlags
	case !Venue(src[offVenue : offVenue+4]).Valid():
		return errWireVenue
	}
	return errWireInstr
}

// View reads fields straight out of an encoded tick without copying it
// (a zero-copy view of a ring slot). Call Check first on bytes of unknown
// origin; the accessors panic on a view shorter than Size.
type View []byte

func (v View) Kind() Kind         { return Kind(v[offKind]) }
func (v View) Flags() Flags       { return Flags(le.Uint16(v[offFlags:])) }
func (v View) Venue() Venue       { return Venue(v[offVenue : offVenue+4]) }
func (v View) Instrument() uint64 { return le.Uint64(v[offInstrument:]) }
func (v View) Price() int64       { return int64(le.Uint64(v[offPrice:])) }
func (v View) Size() uint64       { return le.Uint64(v[offSize:]) }
func (v View) ExchTime() int64    { return int64(le.Uint64(v[offExchTime:])) }
func (v View) PubTime() int64     { return int64(le.Uint64(v[offPubTime:])) }
func (v View) ExchSeq() uint64    { return le.Uint64(v[offExchSeq:]) }
