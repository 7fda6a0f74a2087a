package subscriber_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// BenchmarkPublishPoll_ShmAndTCPSubscribers: one publisher, one subscriber
// on its host (written over shm) and one on another host id (over tcp, on
// loopback), in one process; each tick is published, then both rings are
// polled until it arrived. The per-tick cost of a mixed fan-out and each
// side's latency, one tick in flight.
func BenchmarkPublishPoll_ShmAndTCPSubscribers(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	b.Cleanup(cancel)
	open := func(id, host, url string) (*bus.Node, *link.Devices) {
		var urls []string
		if url != "" {
			urls = []string{url}
		}
		n, err := bus.Open(ctx, bus.Config{NodeID: id, HostID: host, NATS: bus.NATSConfig{URLs: urls}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		d := link.NewDevices(link.DevicesConfig{HostID: host})
		b.Cleanup(func() { d.Close() })
		return n, d
	}
	pn, pd := open("bmix-p", "hostA", "")
	nn, nd := open("bmix-near", "hostA", pn.ClientURL())
	fn, fd := open("bmix-far", "hostB", pn.ClientURL())
	near := &latency{h: hdrhistogram.New(1, 10_000_000_000, 3)}
	far := &latency{h: hdrhistogram.New(1, 10_000_000_000, 3)}
	cfg := subscriber.Config{Topic: "bmix", Slots: 1 << 14, StatsInterval: -1, DrainQuiet: 10 * time.Millisecond}
	sn, err := subscriber.New(ctx, nn, nd, cfg, near)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sn.Close() })
	sf, err := subscriber.New(ctx, fn, fd, cfg, far)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sf.Close() })
	pub, err := publisher.New(ctx, pn, pd, publisher.Config{Topic: "bmix", Idle: rdma.Yield{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pub.Close() })
	if err := pub.WaitSubscribers(ctx, 2); err != nil {
		b.Fatal(err)
	}
	if sn.Providers() != "shm" || sf.Providers() != "tcp" {
		b.Fatalf("providers near %q far %q, want shm and tcp", sn.Providers(), sf.Providers())
	}
	var tk tick.Tick
	feed, _ := publisher.NewFeed(publisher.DefaultFeedConfig())
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		feed.Next(&tk, 0)
		tk.PubTime = time.Now().UnixNano()
		if _, err := pub.PublishTick(&tk); err != nil {
			b.Fatal(err)
		}
		for near.n < i || far.n < i {
			if sn.Poll()+sf.Poll() == 0 {
				runtime.Gosched() // the tcp device's goroutines need the CPU to deliver
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(near.h.ValueAtQuantile(50)), "shm-p50-ns")
	b.ReportMetric(float64(far.h.ValueAtQuantile(50)), "tcp-p50-ns")
	b.ReportMetric(float64(far.h.ValueAtQuantile(99)), "tcp-p99-ns")
}
