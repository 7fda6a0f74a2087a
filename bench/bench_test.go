package bench

import (
	"testing"
	"time"

	"github.com/tickbus/tickbus/ring"
)

// Per-tick cost of each transport's send and receive on one goroutine (no
// second core involved): what the harness adds around a figure. The
// cross-core figures are tickbus bench's.
func benchSendNext(b *testing.B, tx txPort, rx rxPort) { benchSendNextIdle(b, tx, rx, nil) }

// benchSendNextIdle is benchSendNext with idle (if set) called before each
// send: what a receiving loop does while it waits (an empty poll), so that
// work a port defers to its next poll is not timed, as across processes.
func benchSendNextIdle(b *testing.B, tx txPort, rx rxPort, idle func()) {
	b.Helper()
	deadline := nanotime() + int64(time.Hour)
	h := newHist()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if idle != nil {
			idle()
		}
		if err := tx.send(int64(i), nanotime(), deadline); err != nil {
			b.Fatal(err)
		}
		_, ts, err := rx.next(deadline)
		if err != nil {
			b.Fatal(err)
		}
		record(h, nanotime()-ts)
	}
	b.StopTimer()
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p99.9-ns")
}

func BenchmarkFloor_SendNext(b *testing.B) {
	tx, rx := floorPair(b, 64)
	benchSendNext(b, tx, rx)
}

func BenchmarkChan_SendNext(b *testing.B) {
	tx, rx := chanPair(64, 1)
	benchSendNext(b, tx, rx)
}

func BenchmarkTickbusShm_SendNext(b *testing.B) {
	for _, mode := range []ring.Mode{ring.Reliable, ring.Lossy} {
		b.Run(mode.String(), func(b *testing.B) {
			tp := newLoopTopo(b, mode)
			benchSendNext(b, tp.tx, tp.rx)
		})
	}
}

// BenchmarkTickbusShm_IdleSendNext: as SendNext, with one empty Poll
// before each send (untimed work is not excluded: the timer runs), so
// p50-ns is a tick's send to its caller with the subscriber's idle-time
// work (the last tick's latency into the histogram) done before the send,
// where an idle poll loop does it.
func BenchmarkTickbusShm_IdleSendNext(b *testing.B) {
	tp := newLoopTopo(b, ring.Reliable)
	benchSendNextIdle(b, tp.tx, tp.rx, func() {
		if tp.rx.s.Poll() != 0 {
			b.Fatal("an idle poll delivered")
		}
	})
}

// Per-tick cost of batched sends (64 ticks per send), received one by one.
func BenchmarkTickbusShm_Batch64SendNext(b *testing.B) {
	for _, mode := range []ring.Mode{ring.Reliable, ring.Lossy} {
		b.Run(mode.String(), func(b *testing.B) {
			tp := newLoopTopo(b, mode)
			benchBatch(b, tp.tx, tp.rx, 64)
		})
	}
}

func BenchmarkFloor_Batch64SendNext(b *testing.B) {
	tx, rx := floorPair(b, 64)
	benchBatch(b, tx, rx, 64)
}

func benchBatch(b *testing.B, tx txPort, rx rxPort, batch int) {
	b.Helper()
	deadline := nanotime() + int64(time.Hour)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if err := tx.sendBatch(int64(i), batch, 1, deadline); err != nil {
			b.Fatal(err)
		}
		for range batch {
			if _, _, err := rx.next(deadline); err != nil {
				b.Fatal(err)
			}
		}
	}
}
