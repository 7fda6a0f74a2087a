package itch

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/itchgen"
	"github.com/tickbus/tickbus/tick"
)

// BenchmarkReplay measures the reader and the book on one core: one op is
// one message, read from memory, applied to the book, its ticks produced.
// The file is replayed in a loop (it ends with an empty book).
func BenchmarkReplay(b *testing.B) {
	raw, _ := itchgen.Generate(itchgen.Config{Seed: 11, Messages: 1 << 20, Stocks: 500, Drain: true})
	br := bytes.NewReader(raw)
	rd := NewReader(br)
	book := NewBook(Venue, Midnight(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
	var (
		out   [MaxTicks]tick.Tick
		ticks int
	)
	msgs := 0
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
		msgs++
	}
	b.SetBytes(int64(len(raw) / msgs))
	br.Reset(raw)
	rd.Reset(br)
	b.ReportAllocs()
	runtime.LockOSThread() // the thread's CPU time is the loop's
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m, err := rd.Next()
		if err == io.EOF {
			br.Reset(raw)
			rd.Reset(br)
			book.Reset()
			m, err = rd.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		n, err := book.Apply(m, rd.Count(), out[:])
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	el := time.Since(start)
	b.StopTimer()
	cpu := threadCPU(b) - cpu0
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	// Messages per second of CPU time this thread got: on a shared,
	// loaded machine the wall-clock rate includes time others ran.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "msgs/cpu-s")
	b.ReportMetric(float64(ticks)/float64(b.N), "ticks/msg")
}

func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
