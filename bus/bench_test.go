package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
)

func reportHist(b *testing.B, h *hdrhistogram.Histogram) {
	b.ReportMetric(float64(h.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "p99.9-ns")
	b.ReportMetric(float64(h.Max()), "max-ns")
}

// BenchmarkConnect_RoundTrip: one queue-pair exchange (request, accept
// handler, reply) between two nodes over the embedded server.
func BenchmarkConnect_RoundTrip(b *testing.B) {
	ctx := context.Background()
	cfg := testConfig("a", "")
	cfg.RequestTimeout = 5 * time.Second
	a, err := bus.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	n, err := bus.Open(ctx, testConfig("b", a.ClientURL()))
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Subscribe(ctx, subSpec("t", "s", &recorder{})); err != nil {
		b.Fatal(err)
	}
	req := bus.ConnectRequest{Topic: "t", Kind: bus.TargetSubscriber, ID: "s", Endpoint: sampleEndpoint(rdma.ProviderTCP, "host-a", 1)}
	h := hdrhistogram.New(1, int64(10*time.Second), 3)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := a.Connect(ctx, "b", req); err != nil {
			b.Fatal(err)
		}
		_ = h.RecordValue(int64(time.Since(t0)))
	}
	reportHist(b, h)
}

// BenchmarkDiscovery_SubscriberToPublisher: from Subscribe on one node to
// OnSubscriber on another.
func BenchmarkDiscovery_SubscriberToPublisher(b *testing.B) {
	ctx := context.Background()
	a, err := bus.Open(ctx, testConfig("a", ""))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	n, err := bus.Open(ctx, testConfig("b", a.ClientURL()))
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	seen := make(chan struct{}, 1)
	spec := pubSpec("t", &recorder{})
	spec.OnSubscriber = func(bus.SubscriberInfo) { seen <- struct{}{} }
	if _, err := a.Publish(ctx, spec); err != nil {
		b.Fatal(err)
	}
	h := hdrhistogram.New(1, int64(10*time.Second), 3)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		s, err := n.Subscribe(ctx, subSpec("t", fmt.Sprintf("s%d", i), &recorder{}))
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			b.Fatal("subscriber not discovered in 10s")
		}
		_ = h.RecordValue(int64(time.Since(t0)))
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	reportHist(b, h)
}
