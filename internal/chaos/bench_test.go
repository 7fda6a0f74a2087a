package chaos

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkFailover: two publisher processes (compare-and-swap claims,
// 2000 ticks/s each) and a subscriber process on one host (shm), against a
// nats-server with JetStream and the default lease. Each iteration
// SIGKILLs the topic's home and starts a new publisher in its place. The
// failover time is from the old home's last tick to the first tick through
// the new home, as the subscriber delivered them (FailoverAfter: the ticks
// either side of the hole the failover left); p50 and max over the
// iterations. Run
// with a count of iterations: -benchtime=10x.
func BenchmarkFailover(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := newLocalHarness(b, ctx)
	h.rate = 2000
	sub := h.startSub(0, "lossy")
	h.startPub(0)
	h.startPub(1)
	h.progress("start", 60*time.Second)
	var kills []int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := h.waitHome(30 * time.Second)
		p := h.pubs[slot]
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
		require.NoError(b, p.cmd.Process.Signal(syscall.SIGKILL))
		<-p.done
		kills = append(kills, time.Now().UnixNano())
		h.waitNewHome(p.num("epoch"), 30*time.Second)
		h.progress("after the home was killed", 30*time.Second)
		h.startPub(slot)
		h.progress("after a publisher started", 30*time.Second)
	}
	b.StopTimer()
	for _, p := range h.pubs {
		if p != nil && p.alive() {
			h.stopPub(p)
		}
	}
	sub.stdin.Close()
	sub.expect(b, "DONE", 60*time.Second)
	<-sub.done
	recs, err := ReadFile(sub.out)
	require.NoError(b, err)
	s, err := SubscriberFrom(sub.name, recs)
	require.NoError(b, err)
	var took []time.Duration
	for _, k := range kills {
		f, ok := FailoverAfter(s, k)
		require.True(b, ok, "no failover seen after the kill at %d", k)
		took = append(took, f.Took)
	}
	epochs := Failovers(s)
	slices.Sort(took)
	b.Logf("%d homes killed; failovers %v; the subscriber saw %d epoch events", b.N, took, len(epochs))
	b.ReportMetric(float64(took[(len(took)-1)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(0, "ns/op") // an iteration's wall time includes restarting a publisher: not a figure
}
