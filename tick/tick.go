package tick

import (
	"fmt"
	"strconv"
)

// Kind is what a tick reports.
type Kind uint8

const (
	// Trade: a trade printed at Price for Size.
	Trade Kind = 1
	// Bid: the best bid is now Price for Size.
	Bid Kind = 2
	// Ask: the best offer is now Price for Size.
	Ask Kind = 3
)

// Valid reports whether k is a defined kind.
func (k Kind) Valid() bool { return k >= Trade && k <= Ask }

func (k Kind) String() string {
	switch k {
	case Trade:
		return "trade"
	case Bid:
		return "bid"
	case Ask:
		return "ask"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Flags qualify a tick.
type Flags uint16

const (
	// FlagSnapshot: the tick restates state (a refresh), not a new event.
	FlagSnapshot Flags = 1 << iota
	// FlagLastInBatch: the last tick of one venue message or feed batch.
	FlagLastInBatch
	// FlagImplied: an implied (synthetic) price, not one on the book.
	FlagImplied
	// FlagAuction: printed in an auction.
	FlagAuction
	// FlagOffBook: an off-book (negotiated) trade.
	FlagOffBook

	// FlagsDefined is every bit with a meaning; the rest must be zero.
	FlagsDefined = FlagSnapshot | FlagLastInBatch | FlagImplied | FlagAuction | FlagOffBook
)

// Venue is a market's ISO 10383 MIC ("XNAS"): four upper-case ASCII letters
// or digits, or all zero for none.
type Venue [4]byte

// ParseVenue returns the venue for a 4-character MIC, or the zero venue for
// "".
func ParseVenue(s string) (Venue, error) {
	var v Venue
	if s == "" {
		return v, nil
	}
	if len(s) != 4 {
		return v, fmt.Errorf("%w: venue %q, want a 4-character MIC such as XNAS", ErrInvalid, s)
	}
	copy(v[:], s)
	if !v.Valid() {
		return Venue{}, fmt.Errorf("%w: venue %q, want upper-case ASCII letters and digits", ErrInvalid, s)
	}
	return v, nil
}

// Valid reports whether v is all zero or four upper-case letters or digits.
func (v Venue) Valid() bool {
	return wireBad(Version|uint64(Trade)<<8|uint64(le.Uint32(v[:]))<<32, 1) == 0 // a valid tick but for v
}

func (v Venue) String() string {
	if v == (Venue{}) {
		return "-"
	}
	return string(v[:])
}

// PriceScale is the number of price units in one currency unit: prices are
// integers in units of 1e-8 (so 101.25 is 10_125_000_000), exact for every
// listed tick size and free of floating point on the hot path.
const PriceScale = 100_000_000

// PriceFromFloat converts a price to scaled units, rounding to nearest. For
// configuration and feeds, not for the hot path of a real venue adapter.
func PriceFromFloat(f float64) int64 {
	if f < 0 {
		return -int64(-f*PriceScale + 0.5)
	}
	return int64(f*PriceScale + 0.5)
}

// PriceFloat converts scaled units to a float, for display.
func PriceFloat(p int64) float64 { return float64(p) / PriceScale }

// AppendPrice appends p as a decimal with eight fractional digits, trailing
// zeros trimmed to two, without allocating if b has room.
func AppendPrice(b []byte, p int64) []byte {
	u := uint64(p)
	if p < 0 {
		b = append(b, '-')
		u = uint64(-p)
	}
	b = strconv.AppendUint(b, u/PriceScale, 10)
	frac := u % PriceScale
	var digits [8]byte
	for i := 7; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 8
	for n > 2 && digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// Tick is one market-data event, decoded.
type Tick struct {
	Instrument uint64 // instrument id, > 0
	Venue      Venue
	Kind       Kind
	Flags      Flags
	Price      int64  // units of 1/PriceScale
	Size       uint64 // quantity
	ExchTime   int64  // exchange timestamp, ns since the Unix epoch
	PubTime    int64  // publish (or intended send) time, ns since the Unix epoch
	ExchSeq    uint64 // the venue's sequence number, 0 if none
}

// Validate checks the fields an encoder must refuse.
func (t *Tick) Validate() error {
	switch {
	case t.Instrument == 0:
		return errInstrument
	case !t.Kind.Valid():
		return errKind
	case t.Flags&^FlagsDefined != 0:
		return errFlags
	case !t.Venue.Valid():
		return errVenue
	}
	return nil
}

// Pre-built errors, so that validation on the hot path does not allocate.
var (
	errInstrument = fmt.Errorf("%w: instrument id 0, want > 0", ErrInvalid)
	errKind       = fmt.Errorf("%w: kind, want trade (1), bid (2) or ask (3)", ErrInvalid)
	errFlags      = fmt.Errorf("%w: flags has undefined bits", ErrInvalid)
	errVenue      = fmt.Errorf("%w: venue, want 4 upper-case ASCII letters or digits, or none", ErrInvalid)

	errLength    = fmt.Errorf("%w: length is not %d bytes", ErrMalformed, Size)
	errVersion   = fmt.Errorf("%w: version is not %d", ErrMalformed, Version)
	errWireKind  = fmt.Errorf("%w: unknown kind", ErrMalformed)
	errWireFlags = fmt.Errorf("%w: undefined flag bits set", ErrMalformed)
	errWireVenue = fmt.Errorf("%w: venue is not a MIC", ErrMalformed)
	errWireInstr = fmt.Errorf("%w: instrument id 0", ErrMalformed)
	errShort     = fmt.Errorf("%w: need %d bytes", ErrShortBuffer, Size)
)

// AppendText appends a one-line human form of t, for `tickbus sub --print`.
func (t *Tick) AppendText(b []byte) []byte {
	b = append(b, t.Venue.String()...)
	b = append(b, " #"...)
	b = strconv.AppendUint(b, t.Instrument, 10)
	b = append(b, ' ')
	b = append(b, t.Kind.String()...)
	b = append(b, ' ')
	b = AppendPrice(b, t.Price)
	b = append(b, " x "...)
	b = strconv.AppendUint(b, t.Size, 10)
	if t.ExchSeq != 0 {
		b = append(b, " xseq="...)
		b = strconv.AppendUint(b, t.ExchSeq, 10)
	}
	if t.Flags != 0 {
		b = append(b, " flags=0x"...)
		b = strconv.AppendUint(b, uint64(t.Flags), 16)
	}
	return b
}
