package itch

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Sentinel errors; a Reader's or Book's error wraps one of them in an
// *Error naming the message. Test them with errors.Is.
var (
	// ErrTruncated: the input ends inside a length prefix or a message.
	ErrTruncated = errors.New("itch: truncated message")
	// ErrMalformed: a zero length, an unknown type, or a length that is
	// not the type's.
	ErrMalformed = errors.New("itch: malformed message")
	// ErrBook: a message the order book cannot apply (an unknown order
	// reference, more shares executed or cancelled than the order has, a
	// bad side, an order reference added twice).
	ErrBook = errors.New("itch: message inconsistent with the order book")
)

// Error is where a replay stopped: the message's 1-based number in the
// file and the byte offset of its length prefix.
type Error struct {
	Number uint64 // 1-based position of the message in the file
	Offset int64  // byte offset of its 2-byte length prefix
	Err    error  // wraps ErrTruncated, ErrMalformed or ErrBook
}

func (e *Error) Error() string {
	return "itch: message " + strconv.FormatUint(e.Number, 10) + " at byte offset " + strconv.FormatInt(e.Offset, 10) +
		": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// bufSize is the Reader's buffer: large reads, few syscalls.
const bufSize = 1 << 20

// maxLen is the longest message of the specification.
const maxLen = 50

// Reader reads a TotalView-ITCH 5.0 file: messages, each preceded by its
// length as 2 bytes big-endian. Every message's length is checked against
// its type. After an error the Reader returns that error for ever. Next
// allocates nothing.
type Reader struct {
	r      io.Reader
	buf    []byte
	start  int   // first unread byte of buf
	end    int   // end of the valid bytes of buf
	base   int64 // stream offset of buf[0]
	eof    bool  // r has returned io.EOF
	n      uint64
	err    error
	rerr   error // a read error other than io.EOF
	offset int64 // stream offset of the last message's length prefix
}

// NewReader reads messages from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, bufSize)}
}

// Reset makes rd read r from the start, keeping its buffer.
func (rd *Reader) Reset(r io.Reader) {
	*rd = Reader{r: r, buf: rd.buf}
}

// Count is how many messages Next has returned.
func (rd *Reader) Count() uint64 { return rd.n }

// Offset is the stream offset of the last message's length prefix.
func (rd *Reader) Offset() int64 { return rd.offset }

// Consumed is how many bytes of the stream the returned messages span.
func (rd *Reader) Consumed() int64 { return rd.base + int64(rd.start) }

// Next returns the next message, valid until the next call; io.EOF at a
// clean end of the input; otherwise an *Error (ErrTruncated, ErrMalformed)
// or the underlying reader's error wrapped in one.
func (rd *Reader) Next() (Message, error) {
	if rd.err != nil {
		return nil, rd.err
	}
	if rd.end-rd.start < 2+maxLen && !rd.eof {
		rd.fill()
	}
	avail := rd.end - rd.start
	if avail == 0 {
		return nil, rd.fail(io.EOF)
	}
	b := rd.buf[rd.start:rd.end]
	if avail < 2 {
		return nil, rd.bad(ErrTruncated, "1 byte of a length prefix, then the end")
	}
	l := int(b[0])<<8 | int(b[1])
	if l == 0 {
		return nil, rd.bad(ErrMalformed, "length 0")
	}
	if avail < 2+l {
		if l > maxLen {
			return nil, rd.bad(ErrMalformed, "length "+strconv.Itoa(l)+", longer than any 5.0 message")
		}
		return nil, rd.bad(ErrTruncated, "length "+strconv.Itoa(l)+", but only "+strconv.Itoa(avail-2)+" bytes follow")
	}
	m := Message(b[2 : 2+l : 2+l])
	if want := int(Lengths[m[0]]); want != l {
		if want == 0 {
			return nil, rd.bad(ErrMalformed, "unknown message type "+strconv.QuoteRune(rune(m[0])))
		}
		return nil, rd.bad(ErrMalformed, "type "+strconv.QuoteRune(rune(m[0]))+" of length "+strconv.Itoa(l)+", want "+strconv.Itoa(want))
	}
	rd.offset = rd.base + int64(rd.start)
	rd.start += 2 + l
	rd.n++
	return m, nil
}

// fill moves the unread bytes to the front and reads until the buffer is
// full or the input ends.
func (rd *Reader) fill() {
	if rd.start > 0 {
		n := copy(rd.buf, rd.buf[rd.start:rd.end])
		rd.base += int64(rd.start)
		rd.start, rd.end = 0, n
	}
	for empty := 0; rd.end < len(rd.buf) && !rd.eof; {
		n, err := rd.r.Read(rd.buf[rd.end:])
		rd.end += n
		if err == nil && n == 0 {
			if empty++; empty == 100 {
				err = io.ErrNoProgress
			}
		}
		if err != nil {
			rd.eof = true
			if err != io.EOF {
				rd.rerr = err
			}
		}
		if rd.end-rd.start >= 2+maxLen {
			return // enough for one message; read more next time
		}
	}
}

func (rd *Reader) fail(err error) error {
	if err == io.EOF && rd.rerr != nil {
		return rd.bad(rd.rerr, "read")
	}
	rd.err = err
	return err
}

// bad records an error at the next message (number n+1, at the current
// offset): off the hot path, it may allocate.
func (rd *Reader) bad(kind error, detail string) error {
	if rd.rerr != nil && kind != rd.rerr {
		kind, detail = rd.rerr, "read"
	}
	rd.err = &Error{Number: rd.n + 1, Offset: rd.base + int64(rd.start), Err: fmt.Errorf("%w: %s", kind, detail)}
	return rd.err
}
