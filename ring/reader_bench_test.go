package ring

import (
	"testing"
	"time"
)

// BenchmarkPoll_Batch is the reader's per-tick cost when a poll delivers a
// run (what a subscriber that keeps up with a flood does): ticks published
// outside the timer in chunks of 4096, then polled in runs of 256 (the
// bench's WithBatch). ns and cpu-ns are per tick.
func BenchmarkPoll_Batch(b *testing.B) {
	for _, mode := range []Mode{Lossy, Reliable} {
		b.Run(mode.String(), func(b *testing.B) {
			tp := newTopo(b, HomeConfig{}, WriterConfig{})
			r := tp.addRing(RingConfig{Slots: 1 << 13, Mode: mode, MaxBatch: 256})
			rd := r.Reader()
			payload := make([]byte, 64)
			h := &nopHandler{}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for done := 0; done < b.N; {
				b.StopTimer()
				k := min(4096, b.N-done)
				for range k {
					if _, err := tp.w.Publish(1, payload, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				c0 := cpuNow()
				for got := 0; got < k; {
					got += rd.Poll(h)
				}
				cpu += cpuNow() - c0
				done += k
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			if h.events != 0 || h.ticks != b.N {
				b.Fatalf("%d events, %d of %d ticks", h.events, h.ticks, b.N)
			}
		})
	}
}
