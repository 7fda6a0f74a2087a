package ring

import (
	"runtime"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// BenchmarkPingPong is a round trip between two goroutines, each on a
// thread of its own: one publishes a tick into ring A (solo writer, as a
// topic's home publishes) and polls ring B for the echo; the other polls A
// and publishes each tick back into B. 64-byte payloads, 128-byte slots
// (two lines), reliable rings, busy-spin. pub-p50-ns is the Publish call
// alone (its clock read is inside the round trip). Measured so, a reader
// that also loads a two-line slot's second line while it polls the stamp
// (last session's idea) was slower: p50 918-1015 ns against 772-901 ns,
// six interleaved runs each, load 7. In-process across two cores;
// tickbus bench --pingpong measures it across processes, and
// subscriber's BenchmarkPingPong with the publisher and subscriber layers.
func BenchmarkPingPong(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two Ps: a ping-pong on one spins against itself")
	}
	// every=0: back to back; every=50µs and every=1ms: one ping per
	// period, as tickbus bench --pingpong --rate 20000 and 1000 pace them
	// (both pollers spin in between).
	for _, every := range []time.Duration{0, 50 * time.Microsecond, time.Millisecond} {
		b.Run("every="+every.String(), func(b *testing.B) { benchPingPong(b, int64(every)) })
	}
}

func benchPingPong(b *testing.B, every int64) {
	wc := WriterConfig{SoloHome: soloHere, Timeout: 10 * time.Second}
	ta, ra := benchTopo(b, 0, Reliable, 1<<12, wc)
	tb, rb := benchTopo(b, 0, Reliable, 1<<12, wc)
	rda, rdb := ra.Reader(), rb.Reader()
	payload := make([]byte, 64)
	n := uint64(b.N)
	echoErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		h := &echoHandler{w: tb.w}
		for rda.Next() <= n && h.err == nil {
			rda.Poll(h)
		}
		echoErr <- h.err
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hist := hdrhistogram.New(1, int64(time.Second), 3)
	pubHist := hdrhistogram.New(1, int64(time.Second), 3)
	h := &nopHandler{}
	b.ReportAllocs()
	b.ResetTimer()
	next := monoNs()
	for i := uint64(1); i <= n; i++ {
		for next += every; monoNs() < next; {
		}
		t0 := monoNs()
		if _, err := ta.w.Publish(1, payload, t0); err != nil {
			b.Fatal(err)
		}
		_ = pubHist.RecordValue(monoNs() - t0)
		for rdb.Next() <= i {
			rdb.Poll(h)
		}
		_ = hist.RecordValue(min(monoNs()-t0, int64(time.Second)))
	}
	b.StopTimer()
	if err := <-echoErr; err != nil {
		b.Fatal(err)
	}
	if h.events != 0 {
		b.Fatalf("%d events", h.events)
	}
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(pubHist.ValueAtQuantile(50)), "pub-p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99.9)), "p99.9-ns")
}

// echoHandler publishes every tick it gets, unchanged, with w.
type echoHandler struct {
	w   *Writer
	err error
}

func (e *echoHandler) OnTicks(ts []Tick) {
	for i := range ts {
		if _, err := e.w.Publish(ts[i].Type, ts[i].Payload, ts[i].PublishNs); err != nil && e.err == nil {
			e.err = err
		}
	}
}

func (e *echoHandler) OnEvent(Event) {}
