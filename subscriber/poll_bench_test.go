package subscriber_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

func cpuNow() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPoll is the subscriber's side of one tick: a Poll that delivers
// one tick (published outside the timer, in chunks), its latency taken and
// recorded, and the handler called ("tick"); and a Poll that finds nothing
// (what an idle poll loop repeats between ticks: "empty"). In-process,
// cache-hot, one goroutine: the CPU the subscriber adds per tick, not a
// cross-core latency (tickbus bench measures that).
func BenchmarkPoll(b *testing.B) {
	var h counting
	pub, sub := benchRigWith(b, "bench-poll", &h, func(c *subscriber.Config) { c.Slots, c.MaxBatch = 1<<12, 1 })
	payload := make([]byte, tick.Size)
	b.Run("tick", func(b *testing.B) {
		b.ReportAllocs()
		var cpu time.Duration
		polls := 0
		for polls < b.N {
			b.StopTimer()
			for k := 0; k < 1024; k++ {
				if _, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano()); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
			c0 := cpuNow()
			for k := 0; k < 1024 && polls < b.N; k++ {
				if sub.Poll() != 1 {
					b.Fatal("a poll did not deliver one tick")
				}
				polls++
			}
			cpu += cpuNow() - c0
			b.StopTimer()
			for sub.Poll() > 0 { // what the last chunk left
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("empty", func(b *testing.B) {
		b.ReportAllocs()
		c0 := cpuNow()
		for i := 0; i < b.N; i++ {
			if sub.Poll() != 0 {
				b.Fatal("an empty ring delivered")
			}
		}
		b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
	})
	if h.events != 0 {
		b.Fatalf("%d events", h.events)
	}
}

// BenchmarkPoll_Batch is the subscriber's side of a tick delivered in a run
// (what a subscriber keeping up with a flood does): ticks published outside
// the timer in chunks of 4096 (one PublishNs per chunk of 64, as a batched
// publisher stamps them), polled in runs of 256 (the bench's WithBatch), each
// tick's latency taken and recorded and the handler called. ns and cpu-ns
// are per tick; in-process and cache-warm, the CPU the subscriber adds.
func BenchmarkPoll_Batch(b *testing.B) {
	for _, mode := range []ring.Mode{ring.Lossy, ring.Reliable} {
		b.Run(mode.String(), func(b *testing.B) { benchPollBatch(b, mode) })
	}
}

func benchPollBatch(b *testing.B, mode ring.Mode) {
	var h counting
	pub, sub := benchRigWith(b, "bench-pollbatch-"+mode.String(), &h, func(c *subscriber.Config) { c.Slots, c.MaxBatch, c.Mode = 1<<13, 256, mode })
	batch := make([]ring.Tick, 64)
	for i := range batch {
		batch[i] = ring.Tick{Type: tick.MessageType, Payload: make([]byte, tick.Size)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for done := 0; done < b.N; {
		b.StopTimer()
		k := min(4096, (b.N-done+63)&^63)
		for sent := 0; sent < k; sent += len(batch) {
			now := time.Now().UnixNano()
			for i := range batch {
				batch[i].PublishNs = now
			}
			if _, err := pub.PublishBatch(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuNow()
		for got := 0; got < k; {
			got += sub.Poll()
		}
		cpu += cpuNow() - c0
		done += k
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	if h.events != 0 || h.ticks < b.N {
		b.Fatalf("%d events, %d of %d ticks", h.events, h.ticks, b.N)
	}
}
