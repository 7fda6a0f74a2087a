package subscriber_test

import (
	"context"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// latency records, per delivered tick, receive time minus publish time.
type latency struct {
	h *hdrhistogram.Histogram
	n int
}

func (l *latency) OnTicks(ts []ring.Tick) {
	now := time.Now().UnixNano()
	for i := range ts {
		_ = l.h.RecordValue(now - ts[i].PublishNs)
	}
	l.n += len(ts)
}
func (l *latency) OnEvent(ring.Event) {}

func benchRig(b *testing.B, topic string, h subscriber.Handler) (*publisher.Publisher, *subscriber.Subscriber) {
	b.Helper()
	return benchRigWith(b, topic, h, nil)
}

// benchRigWith is benchRig with the subscriber's config changed by opt. The
// node holds the tests' long lease and heartbeat timeout: on a loaded
// machine the 1 s default lease lapsed mid-benchmark (ErrNoHome, a
// failover's events), which is not what a benchmark here measures.
func benchRigWith(b *testing.B, topic string, h subscriber.Handler, opt func(*subscriber.Config)) (*publisher.Publisher, *subscriber.Subscriber) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b.Cleanup(cancel)
	node, err := bus.Open(ctx, bus.Config{NodeID: "bench-" + topic, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	b.Cleanup(func() { devs.Close() })
	cfg := subscriber.Config{Topic: topic, Slots: 1 << 14, StatsInterval: -1, DrainQuiet: 10 * time.Millisecond}
	if opt != nil {
		opt(&cfg)
	}
	sub, err := subscriber.New(ctx, node, devs, cfg, h)
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
	return pub, sub
}

// BenchmarkPublishPoll: one tick through the whole path (claim at the
// home, write into the ring over shm, poll, latency recorded), publisher
// and subscriber on one goroutine: the per-tick cost without scheduling.
func BenchmarkPublishPoll(b *testing.B) {
	l := &latency{h: hdrhistogram.New(1, 10_000_000_000, 3)}
	pub, sub := benchRig(b, "bench1", l)
	var tk tick.Tick
	feed, _ := publisher.NewFeed(publisher.DefaultFeedConfig())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		feed.Next(&tk, 0)
		tk.PubTime = time.Now().UnixNano()
		if _, err := pub.PublishTick(&tk); err != nil {
			b.Fatal(err)
		}
		for sub.Poll() > 0 {
		}
	}
	b.StopTimer()
	if l.n != b.N {
		b.Fatalf("delivered %d of %d", l.n, b.N)
	}
	b.ReportMetric(float64(l.h.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(l.h.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(l.h.ValueAtQuantile(99.9)), "p99.9-ns")
}

// BenchmarkPublishBatch64Poll: 64 ticks per PublishBatch.
func BenchmarkPublishBatch64Poll(b *testing.B) {
	l := &latency{h: hdrhistogram.New(1, 10_000_000_000, 3)}
	pub, sub := benchRig(b, "bench64", l)
	batch := make([]ring.Tick, 64)
	for i := range batch {
		batch[i] = ring.Tick{Type: tick.MessageType, Payload: make([]byte, tick.Size)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now := time.Now().UnixNano()
		for i := range batch {
			batch[i].PublishNs = now
		}
		if _, err := pub.PublishBatch(batch); err != nil {
			b.Fatal(err)
		}
		for sub.Poll() > 0 {
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "ticks/s")
}
