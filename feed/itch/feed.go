package itch

import (
	"fmt"
	"io"
	"path/filepath"
	"time"
	_ "time/tzdata" // America/New_York wherever the zone database is missing

	"github.com/tickbus/tickbus/tick"
)

// Venue is the MIC stamped on the ticks of a TotalView-ITCH feed.
var Venue = tick.Venue{'X', 'N', 'A', 'S'}

// newYork is where ITCH timestamps count from midnight.
var newYork = func() *time.Location {
	l, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic("itch: " + err.Error()) // time/tzdata is linked in: cannot happen
	}
	return l
}()

// Midnight is the start of the trading day date (its year, month and day)
// in America/New_York, in ns since the Unix epoch: an ITCH timestamp plus
// this is the message's time.
func Midnight(date time.Time) int64 {
	y, m, d := date.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, newYork).UnixNano()
}

// ParseDate parses a trading day given as YYYY-MM-DD.
func ParseDate(s string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("itch: date %q, want YYYY-MM-DD: %w", s, err)
	}
	return t, nil
}

// DateFromName finds the trading day in a file name of Nasdaq's form,
// MMDDYYYY first ("01302019.NASDAQ_ITCH50"); ok is false if there is none.
func DateFromName(path string) (date time.Time, ok bool) {
	base := filepath.Base(path)
	if len(base) < 8 {
		return time.Time{}, false
	}
	t, err := time.Parse("01022006", base[:8])
	return t, err == nil
}

// Feed replays a TotalView-ITCH 5.0 file as level-1 ticks: a Reader and a
// Book. Instrument is the stock locate code, ExchSeq the message's 1-based
// position in the file, ExchTime its timestamp on the trading day. Next
// allocates nothing once the book has grown.
type Feed struct {
	rd   *Reader
	book *Book
	out  [MaxTicks]tick.Tick
	err  error
}

// NewFeed reads r, a file of the trading day date.
func NewFeed(r io.Reader, date time.Time) *Feed {
	return &Feed{rd: NewReader(r), book: NewBook(Venue, Midnight(date))}
}

// Next returns the ticks of the next message that has any (valid until the
// next call), io.EOF at the end of the file, or an *Error naming the
// message number and byte offset of the first message that is truncated,
// malformed or inconsistent with the book; nothing after it is returned.
func (f *Feed) Next() ([]tick.Tick, error) {
	if f.err != nil {
		return nil, f.err
	}
	for {
		m, err := f.rd.Next()
		if err != nil {
			f.err = err
			return nil, err
		}
		n, err := f.book.Apply(m, f.rd.Count(), f.out[:])
		if err != nil {
			f.err = &Error{Number: f.rd.Count(), Offset: f.rd.Offset(), Err: err}
			return nil, f.err
		}
		if n > 0 {
			return f.out[:n], nil
		}
	}
}

// Messages is how many messages were read.
func (f *Feed) Messages() uint64 { return f.rd.Count() }

// Consumed is how many bytes of the file the messages read span.
func (f *Feed) Consumed() int64 { return f.rd.Consumed() }

// Book is the feed's order book.
func (f *Feed) Book() *Book { return f.book }
