package ring

import (
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// BenchmarkPoll_Idle is a spinning loop's empty polls of a 4096-slot ring
// whose gap timeout (8 ms) has it look for later sequences every ms:
// each poll timed alone, so the report shows what a tick arriving during
// the idle path's slowest poll would wait (p99.99-ns, max-ns) beside the
// typical poll (p50-ns), and slow-per-s counts polls over 5 µs per second
// polled (a preempted poll counts too: compare runs side by side).
func BenchmarkPoll_Idle(b *testing.B) {
	tp := newTopo(b, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1 << 12, GapTimeout: 8 * time.Millisecond})
	rd := r.Reader()
	h := &nopHandler{}
	hist := hdrhistogram.New(1, int64(time.Second), 3)
	slow := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := monoNs()
	t0 := start
	for i := 0; i < b.N; i++ {
		rd.Poll(h)
		t1 := monoNs()
		if d := t1 - t0; d > 5000 {
			slow++
		}
		_ = hist.RecordValue(min(t1-t0, int64(time.Second)))
		t0 = t1
	}
	elapsed := float64(monoNs()-start) / 1e9
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99.99)), "p99.99-ns")
	b.ReportMetric(float64(hist.Max()), "max-ns")
	b.ReportMetric(float64(slow)/elapsed, "slow-per-s")
}
