// Package csv replays ticks from a CSV file.
//
// The first line is the header, exactly these six columns in this order
// (names case-insensitive):
//
//	time,instrument,kind,price,size,exchange_seq
//
// and every other line is one tick:
//
//	time          RFC 3339 with optional fraction (2026-12-01T09:30:00.5-05:00),
//	              or an integer: ns since the Unix epoch
//	instrument    instrument id, an integer > 0
//	kind          trade, bid or ask (or T, B, A)
//	price         a decimal with at most 8 fractional digits (101.25)
//	size          an integer >= 0
//	exchange_seq  the venue's sequence number, an integer; 0 or empty: none
//
// Consecutive lines with the same non-zero exchange_seq are one venue
// message: their ticks are published together and the last carries
// tick.FlagLastInBatch (at most 16 lines per message). A line with
// exchange_seq 0 is a message of its own. A bad line stops the replay with
// an *Error naming its line and column; nothing after it is returned.
package csv

import (
	stdcsv "encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tickbus/tickbus/tick"
)

// Header is the header line the file must start with.
const Header = "time,instrument,kind,price,size,exchange_seq"

var columns = strings.Split(Header, ",")

// MaxBatch is the most lines one message (one exchange_seq) may span.
const MaxBatch = 16

// ErrMalformed: a line that is not a valid tick, or a bad header.
var ErrMalformed = errors.New("csv: malformed")

// Error names where the file is wrong.
type Error struct {
	Line   int    // 1-based
	Column int    // 1-based field number; 0 for the whole line
	Field  string // the column's name, "" for the whole line
	Err    error  // wraps ErrMalformed (or the reader's error)
}

func (e *Error) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("csv: line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("csv: line %d, column %d (%s): %v", e.Line, e.Column, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Reader is a feed.Source over a CSV file.
type Reader struct {
	r       *stdcsv.Reader
	venue   tick.Venue
	out     [MaxBatch]tick.Tick
	pending tick.Tick // read ahead: the first line of the next message
	hasPend bool
	header  bool
	msgs    uint64
	err     error
}

// NewReader reads ticks from r, stamping venue on each ("" for none).
func NewReader(r io.Reader, venue string) (*Reader, error) {
	v, err := tick.ParseVenue(venue)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	cr := stdcsv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked here, to name the line
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	return &Reader{r: cr, venue: v}, nil
}

// Messages is how many messages Next has returned.
func (r *Reader) Messages() uint64 { return r.msgs }

// Consumed is how many bytes were read.
func (r *Reader) Consumed() int64 { return r.r.InputOffset() }

// Next returns the ticks of the next message; io.EOF at the end; an *Error
// for a bad line.
func (r *Reader) Next() ([]tick.Tick, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.header {
		if err := r.readHeader(); err != nil {
			r.err = err
			return nil, err
		}
		r.header = true
	}
	n := 0
	if r.hasPend {
		r.out[0], r.hasPend, n = r.pending, false, 1
	} else {
		t, err := r.line()
		if err != nil {
			r.err = err
			return nil, err
		}
		r.out[0], n = t, 1
	}
	for r.out[0].ExchSeq != 0 {
		t, err := r.line()
		if err == io.EOF {
			break
		}
		if err != nil {
			r.err = err // this message is whole: return it, the error next
			break
		}
		if t.ExchSeq != r.out[0].ExchSeq {
			r.pending, r.hasPend = t, true
			break
		}
		if n == MaxBatch {
			line, _ := r.r.FieldPos(0)
			r.err = &Error{Line: line, Column: 6, Field: columns[5], Err: fmt.Errorf("%w: more than %d lines with exchange_seq %d", ErrMalformed, MaxBatch, t.ExchSeq)}
			return nil, r.err
		}
		r.out[n] = t
		n++
	}
	r.out[n-1].Flags |= tick.FlagLastInBatch
	r.msgs++
	return r.out[:n], nil
}

func (r *Reader) readHeader() error {
	rec, err := r.r.Read()
	if err == io.EOF {
		return &Error{Line: 1, Err: fmt.Errorf("%w: empty file, want the header %q", ErrMalformed, Header)}
	}
	if err != nil {
		return wrapRead(err)
	}
	if len(rec) != len(columns) {
		return &Error{Line: 1, Err: fmt.Errorf("%w: header of %d columns, want %q", ErrMalformed, len(rec), Header)}
	}
	for i, c := range rec {
		if !strings.EqualFold(strings.TrimSpace(c), columns[i]) {
			return &Error{Line: 1, Column: i + 1, Field: columns[i], Err: fmt.Errorf("%w: header column %q, want %q (header %q)", ErrMalformed, c, columns[i], Header)}
		}
	}
	return nil
}

func wrapRead(err error) error {
	var pe *stdcsv.ParseError
	if errors.As(err, &pe) {
		return &Error{Line: pe.Line, Column: pe.Column, Field: "byte", Err: fmt.Errorf("%w: %w", ErrMalformed, pe.Err)}
	}
	return fmt.Errorf("csv: read: %w", err)
}

// line reads and parses one tick line.
func (r *Reader) line() (tick.Tick, error) {
	rec, err := r.r.Read()
	if err == io.EOF {
		return tick.Tick{}, io.EOF
	}
	if err != nil {
		return tick.Tick{}, wrapRead(err)
	}
	line, _ := r.r.FieldPos(0)
	if len(rec) != len(columns) {
		return tick.Tick{}, &Error{Line: line, Err: fmt.Errorf("%w: %d columns, want %d (%s)", ErrMalformed, len(rec), len(columns), Header)}
	}
	bad := func(col int, want string) (tick.Tick, error) {
		return tick.Tick{}, &Error{Line: line, Column: col + 1, Field: columns[col], Err: fmt.Errorf("%w: %q, want %s", ErrMalformed, rec[col], want)}
	}
	t := tick.Tick{Venue: r.venue}
	var ok bool
	if t.ExchTime, ok = parseTime(strings.TrimSpace(rec[0])); !ok {
		return bad(0, "RFC 3339 (2026-12-01T09:30:00.5-05:00) or ns since the Unix epoch")
	}
	if t.Instrument, err = strconv.ParseUint(strings.TrimSpace(rec[1]), 10, 64); err != nil || t.Instrument == 0 {
		return bad(1, "an instrument id > 0")
	}
	switch strings.ToLower(strings.TrimSpace(rec[2])) {
	case "trade", "t":
		t.Kind = tick.Trade
	case "bid", "b":
		t.Kind = tick.Bid
	case "ask", "a":
		t.Kind = tick.Ask
	default:
		return bad(2, "trade, bid or ask")
	}
	if t.Price, ok = ParsePrice(strings.TrimSpace(rec[3])); !ok {
		return bad(3, "a decimal price with at most 8 fractional digits")
	}
	if t.Size, err = strconv.ParseUint(strings.TrimSpace(rec[4]), 10, 64); err != nil {
		return bad(4, "a size, an integer >= 0")
	}
	if s := strings.TrimSpace(rec[5]); s != "" {
		if t.ExchSeq, err = strconv.ParseUint(s, 10, 64); err != nil {
			return bad(5, "an exchange sequence, an integer >= 0 (or empty)")
		}
	}
	return t, nil
}

func parseTime(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		ns, err := strconv.ParseInt(s, 10, 64)
		return ns, err == nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

// ParsePrice parses a decimal ("101.25", "-0.5", "7") exactly into
// tick.PriceScale units; false if it is not one or has more than 8
// fractional digits or overflows.
func ParsePrice(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" && fp == "" || len(fp) > 8 {
		return 0, false
	}
	var v uint64
	for _, c := range []byte(ip) {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<63-1)/10/tick.PriceScale {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > (1<<63-1)/tick.PriceScale {
		return 0, false
	}
	v *= tick.PriceScale
	scale := uint64(tick.PriceScale / 10)
	for _, c := range []byte(fp) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v += uint64(c-'0') * scale
		scale /= 10
	}
	if v > 1<<63-1 {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}
