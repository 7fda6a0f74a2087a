package itch

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/tickbus/tickbus/internal/itchgen"
)

// FuzzFeed: any bytes either replay to the end or stop with an *Error
// that names a message at or after the last one read; nothing panics, and
// every tick is valid.
func FuzzFeed(f *testing.F) {
	raw, _ := itchgen.Generate(itchgen.Config{Seed: 1, Messages: 60, Stocks: 3})
	f.Add(raw)
	f.Add(raw[:len(raw)/2+1])
	f.Add(frame(add('A', 5, 1, 'B', 100, 100_0000), cat(hdr('E', 5), b64(1), b32(100), b64(1))))
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 19, 'D'})
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := NewFeed(bytes.NewReader(data), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
		for {
			ts, err := fd.Next()
			if err == io.EOF {
				if fd.Consumed() != int64(len(data)) {
					t.Fatalf("clean end after %d of %d bytes", fd.Consumed(), len(data))
				}
				return
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v is not an *itch.Error", err)
				}
				if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBook) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				if e.Offset < 0 || e.Offset > int64(len(data)) || e.Number == 0 {
					t.Fatalf("error names offset %d, message %d of %d bytes", e.Offset, e.Number, len(data))
				}
				if _, again := fd.Next(); again != err {
					t.Fatalf("after an error, Next returned %v", again)
				}
				return
			}
			if len(ts) == 0 || len(ts) > MaxTicks {
				t.Fatalf("%d ticks from one message", len(ts))
			}
			for i := range ts {
				if err := ts[i].Validate(); err != nil {
					t.Fatalf("invalid tick %+v: %v", ts[i], err)
				}
			}
		}
	})
}
