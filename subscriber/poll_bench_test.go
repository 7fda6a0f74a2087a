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
// benchPair is a subscriber on topic and the lone publisher of it, on an
// embedded bus in this process, the publisher connected to the ring; both
// close when b ends.
func benchPair(b *testing.B, topic string, maxBatch int, h subscriber.Handler) (*subscriber.Subscriber, *publisher.Publisher) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: topic})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	b.Cleanup(func() { devs.Close() })
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: topic, Slots: 1 << 12, MaxBatch: maxBatch,
		StatsInterval: -1, DrainQuiet: 10 * time.Millisecond}, h)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sub.Close() })
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: topic, Idle: rdma.Yield{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pub.Close() })
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		b.Fatal(err)
	}
	return sub, pub
}

func BenchmarkPoll(b *testing.B) {
	var h counting
	sub, pub := benchPair(b, "bench-poll", 1, &h)
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
