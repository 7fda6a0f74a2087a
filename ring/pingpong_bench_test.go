package ring

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// BenchmarkPingPong is a round trip between two goroutines, each on a
// thread of its own: one publishes a tick into ring A (solo writer, as a
// topic's home publishes) and polls ring B for the echo; the other polls A
// and publishes each tick back into B. 64-byte payloads, 96- and 128-byte
// slots (1.5 and 2 lines), reliable rings, busy-spin. pub-p50-ns is the Publish call
// alone (its clock read is inside the round trip). Measured so, a reader
// that also loads a two-line slot's second line while it polls the stamp
// (last session's idea) was slower with 128-byte slots: p50 918-1015 ns
// against 772-901 ns, six interleaved runs each, load 7. In-process across two cores;
// tickbus bench --pingpong measures it across processes, and
// subscriber's BenchmarkPingPong with the publisher and subscriber layers.
func BenchmarkPingPong(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two Ps: a ping-pong on one spins against itself")
	}
	// every=0: back to back; every=50µs and every=1ms: one ping per
	// period, as tickbus bench --pingpong --rate 20000 and 1000 pace them
	// (both pollers spin in between).
	// floor: the same round trip of bare 64-byte lines (stamp and 56
	// payload bytes stored, the stamp polled and the payload read), no
	// ring code: what a round trip costs beyond it is tickbus's own.
	for _, every := range []time.Duration{0, 50 * time.Microsecond, time.Millisecond} {
		b.Run("every="+every.String()+"/floor", func(b *testing.B) { benchPingPongFloor(b, int64(every), 1) })
		b.Run("every="+every.String()+"/floor-2lines", func(b *testing.B) { benchPingPongFloor(b, int64(every), 2) })
		for _, ss := range benchSlotSizes {
			b.Run(fmt.Sprintf("every=%s/slot=%d", every, ss), func(b *testing.B) { benchPingPong(b, int64(every), ss, 0) })
		}
		// journal: each side's writer is its topic's home with a journal
		// of 4096 slots, as in tickbus bench (whose homes keep 4096).
		b.Run(fmt.Sprintf("every=%s/slot=96/journal", every), func(b *testing.B) { benchPingPong(b, int64(every), 96, 4096) })
	}
}

// benchPingPongFloor is benchPingPong's round trip through two arrays of
// 4096 slots of 64-byte lines: each side stores a slot's seven payload
// words and then its stamp (an atomic store), and polls the other array's
// stamp with atomic loads, then reads the seven words. With lines=2 the
// payload words are in the slot's second line, the stamp alone in its
// first: a message that spans two lines, as a ring slot's header and a
// 64-byte payload do.
func benchPingPongFloor(b *testing.B, every int64, lines int) {
	const slots = 1 << 12
	stride := uint64(8 * lines) // words per slot
	alloc := func() []uint64 {
		m := make([]uint64, slots*int(stride)+8)
		off := (8 - int(uintptr(unsafe.Pointer(&m[0]))&63)/8) & 7 // line-aligned
		return m[off : off+slots*int(stride)]
	}
	pa, pb := alloc(), alloc()
	stamp := func(m []uint64, i uint64) *atomic.Uint64 {
		return (*atomic.Uint64)(unsafe.Pointer(&m[(i&(slots-1))*stride]))
	}
	words := func(m []uint64, i uint64) []uint64 {
		o := (i&(slots-1))*stride + stride - 8
		return m[o : o+8]
	}
	put := func(m []uint64, i, v uint64) {
		w := words(m, i)
		w[1], w[2], w[3], w[4], w[5], w[6], w[7] = v, v+1, v+2, v+3, v+4, v+5, v+6
		stamp(m, i).Store(i)
	}
	// get returns the slot's first payload word, or 0 if the other six
	// are not what put stored with it (every word is read).
	get := func(m []uint64, i uint64) uint64 {
		for stamp(m, i).Load() != i {
		}
		w := words(m, i)
		v := w[1]
		if w[2]^w[3]^w[4]^w[5]^w[6]^w[7] != (v+1)^(v+2)^(v+3)^(v+4)^(v+5)^(v+6) {
			return 0
		}
		return v
	}
	n := uint64(b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := uint64(1); i <= n; i++ {
			put(pb, i, get(pa, i))
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hist := hdrhistogram.New(1, int64(time.Second), 3)
	b.ReportAllocs()
	b.ResetTimer()
	next := monoNs()
	bad := 0
	for i := uint64(1); i <= n; i++ {
		for next += every; monoNs() < next; {
		}
		t0 := monoNs()
		put(pa, i, uint64(t0))
		if get(pb, i) != uint64(t0) {
			bad++
		}
		_ = hist.RecordValue(min(monoNs()-t0, int64(time.Second)))
	}
	b.StopTimer()
	<-done
	if bad != 0 {
		b.Fatalf("%d echoes were not the ping's words", bad)
	}
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99.9)), "p99.9-ns")
}

func benchPingPong(b *testing.B, every int64, slotSize, journal int) {
	wc := WriterConfig{SoloHome: soloHere, Timeout: 10 * time.Second}
	ta, ra := benchTopoSlot(b, journal, Reliable, 1<<12, slotSize, wc)
	tb, rb := benchTopoSlot(b, journal, Reliable, 1<<12, slotSize, wc)
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

// BenchmarkPublish_AfterIdle is one Publish into a lossy ring with no
// reader, after the publishing thread spun on the clock for every since
// the last one: the writer's own cost after an idle gap, with no other
// core touching anything it uses. BenchmarkPingPong's round trip grows
// with its period (every=1ms against every=0s); this tells how much of
// that is the Publish call alone. Per writer path (forPaths' three);
// p50-ns and p90-ns are the call's, timed one by one.
func BenchmarkPublish_AfterIdle(b *testing.B) {
	for _, every := range []time.Duration{0, 50 * time.Microsecond, time.Millisecond} {
		for _, p := range writerPaths {
			b.Run("every="+every.String()+"/"+p.name, func(b *testing.B) {
				wc := p.wc
				wc.Timeout = 10 * time.Second
				tp, _ := benchTopoSlot(b, 0, Lossy, 1<<12, 96, wc)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				payload := make([]byte, 64)
				hist := hdrhistogram.New(1, int64(time.Second), 3)
				b.ReportAllocs()
				b.ResetTimer()
				next := monoNs()
				for i := 0; i < b.N; i++ {
					for next += int64(every); monoNs() < next; {
					}
					t0 := monoNs()
					if _, err := tp.w.Publish(1, payload, t0); err != nil {
						b.Fatal(err)
					}
					_ = hist.RecordValue(monoNs() - t0)
				}
				b.StopTimer()
				b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
				b.ReportMetric(float64(hist.ValueAtQuantile(90)), "p90-ns")
			})
		}
	}
}
