package subscriber_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "bench-poll"})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var h counting
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "bench-poll", Slots: 1 << 12, MaxBatch: 1,
		StatsInterval: -1, DrainQuiet: 10 * time.Millisecond}, &h)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "bench-poll", Idle: rdma.Yield{}})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		b.Fatal(err)
	}
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
