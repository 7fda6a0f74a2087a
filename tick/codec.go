package tick

import "encoding/binary"

var le = binary.LittleEndian

// Encode writes t into dst[:Size] and returns Size. It refuses an invalid
// tick (ErrInvalid) or a short dst (ErrShortBuffer), writing nothing. It does
// not allocate.
func Encode(dst []byte, t *Tick) (int, error) {
	if len(dst) < Size {
		return 0, errShort
	}
	if err := t.Validate(); err != nil {
		return 0, err
	}
	put(dst[:Size], t)
	return Size, nil
}

// put writes a validated tick.
func put(b []byte, t *Tick) {
	_ = b[Size-1] // one bounds check
	b[offVersion] = Version
	b[offKind] = byte(t.Kind)
	le.PutUint16(b[offFlags:], uint16(t.Flags))
	copy(b[offVenue:offVenue+4], t.Venue[:])
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
	if err := Check(src); err != nil {
		return err
	}
	v := View(src)
	t.Kind = v.Kind()
	t.Flags = v.Flags()
	t.Venue = v.Venue()
	t.Instrument = v.Instrument()
	t.Price = v.Price()
	t.Size = v.Size()
	t.ExchTime = v.ExchTime()
	t.PubTime = v.PubTime()
	t.ExchSeq = v.ExchSeq()
	return nil
}

// Check reports whether src is a well-formed version-1 tick.
func Check(src []byte) error {
	if len(src) != Size {
		return errLength
	}
	if src[offVersion] != Version {
		return errVersion
	}
	if !Kind(src[offKind]).Valid() {
		return errWireKind
	}
	if Flags(le.Uint16(src[offFlags:]))&^FlagsDefined != 0 {
		return errWireFlags
	}
	if !Venue(src[offVenue : offVenue+4]).Valid() {
		return errWireVenue
	}
	if le.Uint64(src[offInstrument:]) == 0 {
		return errWireInstr
	}
	return nil
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
