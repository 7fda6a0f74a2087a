package chaos

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/netns"
)

// BenchmarkFailover measures failover after a home crashes, with the
// default lease: the time from the old home's last tick to the first tick
// through the new home, as a subscriber delivered them (FailoverAfter: the
// ticks either side of the hole the failover left); p50 and max over the
// iterations. Two publisher processes (compare-and-swap claims, 2000
// ticks/s each) and a lossy subscriber process, in three network-namespace
// hosts (tcp between them, a three-server JetStream cluster) where the
// machine allows, else on one host (shm, one nats-server). Each iteration
// crashes the topic's home:
//
//   - SIGKILL: the home dies; a new publisher starts in its place.
//   - SIGSTOP: the home stops for 3s (as in a long pause or CPU
//     starvation), then continues and must follow the new home.
//
// Run it with a count of iterations: -benchtime=10x.
func BenchmarkFailover(b *testing.B) {
	for _, crash := range []string{"SIGKILL", "SIGSTOP"} {
		b.Run(crash, func(b *testing.B) { benchFailover(b, crash) })
	}
}

func benchFailover(b *testing.B, crash string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var h *harness
	where := "3 netns hosts, tcp, 3-server JetStream cluster"
	if netns.Available() == nil {
		h = newHarness(b, ctx)
	} else {
		h = newLocalHarness(b, ctx)
		where = "1 host, shm, 1 nats-server"
	}
	h.rate = 2000
	sub := h.startSub(2, "lossy")
	h.startPub(0)
	h.startPub(2) // slot 1 claims by fetch-and-add: both compare-and-swap here
	h.progress("start", 60*time.Second)
	var crashes []int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := h.waitHome(30 * time.Second)
		p := h.pubs[slot]
		epoch := p.num("epoch")
		if crash == "SIGKILL" {
			p.mu.Lock()
			p.killed = true
			p.mu.Unlock()
			require.NoError(b, p.cmd.Process.Signal(syscall.SIGKILL))
			<-p.done
			crashes = append(crashes, time.Now().UnixNano())
			h.waitNewHome(epoch, 30*time.Second)
			h.progress("after the home was killed", 30*time.Second)
			h.startPub(slot)
		} else {
			require.NoError(b, p.cmd.Process.Signal(syscall.SIGSTOP))
			crashes = append(crashes, time.Now().UnixNano())
			time.Sleep(3 * time.Second)
			require.NoError(b, p.cmd.Process.Signal(syscall.SIGCONT))
			h.oneHome("after the stopped home woke up", 10*time.Second)
		}
		h.progress("after the crash", 30*time.Second)
	}
	b.StopTimer()
	r := h.finish()
	require.NoError(b, r.Err(), r.Summary(10))
	recs, err := ReadFile(sub.out)
	require.NoError(b, err)
	s, err := SubscriberFrom(sub.name, recs)
	require.NoError(b, err)
	var took []time.Duration
	for _, k := range crashes {
		f, ok := FailoverAfter(s, k)
		require.True(b, ok, "no failover seen after the %s at %d", crash, k)
		took = append(took, f.Took)
	}
	slices.Sort(took)
	b.Logf("%s (%s): %d homes crashed; failovers %v", crash, where, b.N, took)
	b.ReportMetric(float64(took[(len(took)-1)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns")
	b.ReportMetric(0, "ns/op") // an iteration's wall time includes the crash and the restart: not a figure
}
