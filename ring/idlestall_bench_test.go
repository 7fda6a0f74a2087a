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
// journal=on attaches the home's journal, as a subscriber does: an idle
// reader then also READs the home's counter now and then.
func BenchmarkPoll_Idle(b *testing.B) {
	for _, j := range []bool{false, true} {
		b.Run(map[bool]string{false: "journal=off", true: "journal=on"}[j], func(b *testing.B) { benchPollIdle(b, j) })
	}
}

func benchPollIdle(b *testing.B, journal bool) {
	tp := newTopo(b, HomeConfig{JournalSlots: 64}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1 << 12, GapTimeout: 8 * time.Millisecond})
	rd := r.Reader()
	if journal {
		jq, _ := qpPair(b, tp.dev, tp.rcq, tp.dev, tp.homeQ)
		if err := rd.SetJournal(tp.dev, jq, tp.home.Desc(), time.Second); err != nil {
			b.Fatal(err)
		}
	}
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
