package publisher_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/tick"
)

// BenchmarkFailover measures, per failover, the time from the old home's
// last tick to the first tick through the new home, as a publisher of the
// topic sees it: one home publisher and one other publisher on separate
// nodes, a subscriber on a third; the home publisher closes (its lease is
// deleted), the other keeps publishing and fails over. Each iteration is
// one failover (the roles swap). Reports p50-ms and max-ms. A crashed home
// (SIGKILL, SIGSTOP) adds up to the lease TTL (default 750 ms):
// internal/chaos's BenchmarkFailover measures that case with real
// processes.
func BenchmarkFailover(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fr := newFailoverRigB(b, ctx, "bfo")
	payload := make([]byte, tick.Size)
	nodes := []foNode{fr.a, fr.b}
	home, err := publisher.New(ctx, nodes[0].node, nodes[0].devs, publisher.Config{Topic: "bfo", ID: "p0"})
	if err != nil {
		b.Fatal(err)
	}
	var times []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := nodes[(i+1)%2]
		other, err := publisher.New(ctx, next.node, next.devs, publisher.Config{Topic: "bfo", ID: "p" + string(rune('1'+i%2))})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := other.Publish(tick.MessageType, payload, time.Now().UnixNano()); err != nil {
			b.Fatal(err)
		}
		if _, err := home.Publish(tick.MessageType, payload, time.Now().UnixNano()); err != nil {
			b.Fatal(err)
		}
		oldEpoch := other.Epoch()
		last := time.Now() // the old home's last tick
		if err := home.Close(); err != nil {
			b.Fatal(err)
		}
		for {
			// until a tick went through the new home (a claim on the old
			// one's memory may still succeed, below its reservation, until
			// this publisher hears that the lease went)
			_, err := other.Publish(tick.MessageType, payload, time.Now().UnixNano())
			if err == nil && other.Epoch() != oldEpoch {
				break
			}
			if err != nil && err != publisher.ErrNoHome {
				b.Fatal(err)
			}
		}
		times = append(times, time.Since(last))
		if !other.IsHome() {
			b.Fatal("the surviving publisher did not become the home")
		}
		home = other
	}
	b.StopTimer()
	_ = home.Close()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)-1].Microseconds())/1000, "max-ms")
}
