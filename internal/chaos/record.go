package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sentinel errors of the record file. Test them with errors.Is.
var (
	// ErrRecordFull: the recorder's file has no room for another record;
	// what did not fit is counted (Recorder.Dropped), never silently lost.
	ErrRecordFull = errors.New("chaos: record file full")
	// ErrBadRecord: a record file holds bytes no recorder writes.
	ErrBadRecord = errors.New("chaos: bad record")
)

// Record kinds: the first byte of a record; 0 ends the file.
const (
	KindPublished byte = 'P' // a publisher's tick: Publish returned its sequence
	KindFailed    byte = 'F' // a publisher's tick whose Publish returned an error (Seq as returned, maybe 0)
	KindDelivered byte = 'T' // a subscriber's delivered tick
	KindEvent     byte = 'E' // a subscriber's event: sequences A..B named, Sub is the ring.EventKind
)

// RecordSize is the size of one record:
//
//	0      1      2       4            8        16        24       32
//	+------+------+-------+------------+--------+---------+--------+
//	| kind | sub  | 0 0   | publisher  | A: seq | B: hash | ns     |
//	|      |      |       | u32        | /from  | /to     | i64    |
//	+------+------+-------+------------+--------+---------+--------+
//
// little-endian. The kind byte is stored last, atomically, so a record cut
// short by a SIGKILL reads as the end of the file.
const RecordSize = 32

// Record is one decoded record.
type Record struct {
	Kind      byte
	Sub       byte   // KindEvent: the ring.EventKind
	Publisher uint32 // the PublisherID stamped on the tick
	A, B      uint64 // seq and payload hash; or an event's From and To
	Ns        int64  // when it was recorded (publish or delivery time)
}

// Recorder appends records to a file through a shared mapping: the kernel
// keeps every completed record when the process dies. One goroutine
// records.
type Recorder struct {
	f       *os.File
	b       []byte
	n       int // records written
	dropped uint64
}

// Create makes path a record file with room for capacity records (a sparse
// file: only what is written takes space).
func Create(path string, capacity int) (*Recorder, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("chaos: record capacity %d, want >= 1", capacity)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: record file: %w", err)
	}
	size := capacity * RecordSize
	if err := f.Truncate(int64(size)); err != nil {
		return nil, errors.Join(fmt.Errorf("chaos: record file size %d: %w", size, err), f.Close())
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("chaos: map record file: %w", err), f.Close())
	}
	return &Recorder{f: f, b: b}, nil
}

// Add appends r. A full file counts r as dropped and returns ErrRecordFull;
// a nil Recorder records nothing.
func (w *Recorder) Add(r Record) error {
	if w == nil {
		return nil
	}
	off := w.n * RecordSize
	if off+RecordSize > len(w.b) {
		w.dropped++
		return ErrRecordFull
	}
	s := w.b[off : off+RecordSize]
	s[1] = r.Sub
	binary.LittleEndian.PutUint32(s[4:], r.Publisher)
	binary.LittleEndian.PutUint64(s[8:], r.A)
	binary.LittleEndian.PutUint64(s[16:], r.B)
	binary.LittleEndian.PutUint64(s[24:], uint64(r.Ns))
	// The kind last: a reader (after this process died) sees the record
	// whole or not at all. Pairs with nothing in-process: the kernel's page
	// cache is the reader.
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s[0])), uint32(r.Kind)|uint32(r.Sub)<<8)
	w.n++
	return nil
}

// Len is how many records were written; Dropped how many did not fit.
func (w *Recorder) Len() int        { return w.n }
func (w *Recorder) Dropped() uint64 { return w.dropped }

// Close unmaps and closes the file (the records stay). Idempotent.
func (w *Recorder) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := errors.Join(unix.Munmap(w.b), w.f.Close())
	w.f, w.b = nil, nil
	return err
}

// Decode parses a record file's bytes: records until the first whose kind
// is 0 (the end) or the end of b. Anything else no recorder writes (an
// unknown kind, a short record, non-zero padding, an event whose From is
// past its To) is an error wrapping ErrBadRecord that names the record.
func Decode(b []byte) ([]Record, error) {
	var out []Record
	for i := 0; i*RecordSize < len(b); i++ {
		s := b[i*RecordSize:]
		if s[0] == 0 {
			return out, nil
		}
		if len(s) < RecordSize {
			return out, fmt.Errorf("%w: record %d: %d bytes, want %d", ErrBadRecord, i, len(s), RecordSize)
		}
		r := Record{Kind: s[0], Sub: s[1], Publisher: binary.LittleEndian.Uint32(s[4:]),
			A: binary.LittleEndian.Uint64(s[8:]), B: binary.LittleEndian.Uint64(s[16:]), Ns: int64(binary.LittleEndian.Uint64(s[24:]))}
		if s[2] != 0 || s[3] != 0 {
			return out, fmt.Errorf("%w: record %d: padding %x, want 0", ErrBadRecord, i, s[2:4])
		}
		switch r.Kind {
		case KindPublished, KindFailed, KindDelivered:
			if r.Sub != 0 {
				return out, fmt.Errorf("%w: record %d: kind %q with sub-kind %d", ErrBadRecord, i, r.Kind, r.Sub)
			}
		case KindEvent:
			if r.A > r.B || r.A == 0 {
				return out, fmt.Errorf("%w: record %d: event %d..%d, want 1 <= from <= to", ErrBadRecord, i, r.A, r.B)
			}
		default:
			return out, fmt.Errorf("%w: record %d: kind %#x", ErrBadRecord, i, r.Kind)
		}
		out = append(out, r)
	}
	return out, nil
}

// ReadFile decodes the record file at path.
func ReadFile(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return Decode(b)
}

// Hash is FNV-1a over b: how records name a tick's payload.
func Hash(b []byte) uint64 {
	v := uint64(14695981039346656037)
	for _, c := range b {
		v ^= uint64(c)
		v *= 1099511628211
	}
	return v
}
