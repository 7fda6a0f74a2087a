package ring

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/shmem"
)

// Latency benchmarks, each reporting p50, p99, p99.9, p99.99 (ns) from an
// HdrHistogram (1 ns .. 10 s, 3 significant digits). Run them in one go so
// the ratios come from one run:
//
//	go test -run XXX -bench 'Latency|Floor|Jitter' -benchtime 200000x ./ring/
//
// b.N is the number of ticks (or round trips, or schedule points).

const pacedRate = 100_000 // ticks per second

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 10_000_000_000, 3) }

// quants are p50, p99, p99.9, p99.99 and max, in ns.
type quants [5]float64

var quantUnits = [5]string{"p50-ns", "p99-ns", "p99.9-ns", "p99.99-ns", "max-ns"}

func histQuants(h *hdrhistogram.Histogram) quants {
	return quants{float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9)),
		float64(h.ValueAtQuantile(99.99)), float64(h.Max())}
}

func (q quants) report(b *testing.B, prefix string) {
	for i, u := range quantUnits {
		b.ReportMetric(q[i], prefix+u)
	}
}

// BenchmarkLatency_CrossProcess: one publisher process paced at 100,000
// ticks/s, 64-byte ticks, one spinning subscriber process on a reliable
// ring of 65,536 slots (so a descheduled subscriber on a shared host delays
// ticks, which the histogram sees, instead of losing them, which it would
// not); one-way latency from the intended send time to delivery.
func BenchmarkLatency_CrossProcess(b *testing.B) {
	q := ringLatency(b, b.N)
	q.report(b, "")
}

func ringLatency(b *testing.B, count int) quants {
	n := strconv.Itoa(count)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pt := startTopic(b, ctx,
		[]subSpec{{args: []string{"-mode", "reliable", "-slots", "65536", "-end", n, "-idle", "spin", "-lat", "-limit", "9m"}}},
		[]pubSpec{{args: []string{"-claim", "cas", "-how", "paced", "-rate", strconv.Itoa(pacedRate), "-n", n, "-size", "64", "-timeout", "60s"}}})
	b.ResetTimer()
	pt.goAll()
	lat := kv(pt.subs[0].expect(b, "LAT", 9*time.Minute))
	s := kv(pt.subs[0].expect(b, "DONE", time.Minute))
	b.StopTimer()
	pt.done(pt.pubs, time.Minute)
	pt.exitAll()
	if s["events"] != "-" || s["badcrc"] != "0" {
		b.Fatalf("ticks lost or bad during the latency run: %v", s)
	}
	var q quants
	for i, k := range []string{"p50", "p99", "p999", "p9999", "max"} {
		v, err := strconv.ParseFloat(lat[k], 64)
		if err != nil {
			b.Fatalf("%s in %v", k, lat)
		}
		q[i] = v
	}
	return q
}

// BenchmarkLatency_CrossProcess_OneInFlight: one publisher process, one
// spinning subscriber process, reliable ring; the publisher sends tick i
// only once the subscriber has delivered i-1 (it stores the sequence in a
// shared word) and stamps it with its send time. One tick in flight, no
// backlog: one-way latency comparable with the floor's.
func BenchmarkLatency_CrossProcess_OneInFlight(b *testing.B) {
	q := ringLatencyOneInFlight(b, b.N)
	q.report(b, "")
}

func ringLatencyOneInFlight(b *testing.B, count int) quants {
	m, err := shmem.Alloc("ring-ack", 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	dupFile := func() *os.File {
		fd, err := unix.Dup(m.Fd())
		if err != nil {
			b.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "ack")
		b.Cleanup(func() { _ = f.Close() })
		return f
	}
	n := strconv.Itoa(count)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pt := startTopic(b, ctx,
		[]subSpec{{args: []string{"-mode", "reliable", "-slots", "4096", "-end", n, "-idle", "spin", "-lat", "-ack", "-limit", "9m"},
			files: []*os.File{dupFile()}}},
		[]pubSpec{{args: []string{"-claim", "cas", "-how", "pingpong", "-n", n, "-size", "64", "-timeout", "60s"},
			files: []*os.File{dupFile()}}})
	b.ResetTimer()
	pt.goAll()
	lat := kv(pt.subs[0].expect(b, "LAT", 9*time.Minute))
	s := kv(pt.subs[0].expect(b, "DONE", time.Minute))
	b.StopTimer()
	pt.done(pt.pubs, time.Minute)
	pt.exitAll()
	if s["events"] != "-" || s["badcrc"] != "0" {
		b.Fatalf("ticks lost or bad during the latency run: %v", s)
	}
	var q quants
	for i, k := range []string{"p50", "p99", "p999", "p9999", "max"} {
		v, err := strconv.ParseFloat(lat[k], 64)
		if err != nil {
			b.Fatalf("%s in %v", k, lat)
		}
		q[i] = v
	}
	return q
}

// BenchmarkLatency_Chan: the same paced schedule through a buffered Go
// channel between two goroutines, the receiver spinning.
func BenchmarkLatency_Chan(b *testing.B) {
	b.ResetTimer()
	q := chanLatency(b.N)
	b.StopTimer()
	q.report(b, "")
}

func chanLatency(count int) quants {
	ch := make(chan int64, 1<<14)
	h := newHist()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < count; i++ {
			var t int64
			for {
				select {
				case t = <-ch:
				default:
					continue
				}
				break
			}
			_ = h.RecordValue(time.Now().UnixNano() - t)
		}
	}()
	period := int64(time.Second) / pacedRate
	start := time.Now().UnixNano() + int64(time.Millisecond)
	for i := 0; i < count; i++ {
		intended := start + int64(i)*period
		for time.Now().UnixNano() < intended {
		}
		ch <- intended
	}
	<-done
	return histQuants(h)
}

func init() { child.Register("ring-floor", floorMain) }

// floorMain answers pings on a shared cache line: it waits for ping == i
// and stores pong = i, for i = 1..n (argument), on the memfd at fd 3.
func floorMain(args []string) int {
	n, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return die("n: %v", err)
	}
	mem, err := shmem.Map(3, 4096)
	if err != nil {
		return die("map: %v", err)
	}
	ping, pong := at[atomic.Uint64](mem, 0), at[atomic.Uint64](mem, 2*LineSize)
	for i := uint64(1); i <= n; i++ {
		for k := 0; ping.Load() != i; k++ { // pairs with the parent's ping store
			if k&0xfffff == 0xfffff {
				runtime.Gosched()
			}
		}
		pong.Store(i) // pairs with the parent's pong load
	}
	return 0
}

// BenchmarkFloor_CacheLine_CrossProcess: the floor. One cache line handed
// back and forth between two processes through shared memory; one-way is
// half the round trip.
func BenchmarkFloor_CacheLine_CrossProcess(b *testing.B) {
	b.ResetTimer()
	q := floorLatency(b, b.N)
	b.StopTimer()
	q.report(b, "")
}

func floorLatency(b *testing.B, count int) quants {
	m, err := shmem.Alloc("ring-floor", 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, err := child.Command(ctx, "ring-floor", strconv.Itoa(count))
	if err != nil {
		b.Fatal(err)
	}
	// The child gets a dup: the *os.File closes its fd (here, and in its
	// finalizer), and the mapping closes its own.
	fd, err := unix.Dup(m.Fd())
	if err != nil {
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "floor")
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	_ = f.Close()
	if err != nil {
		b.Fatal(err)
	}
	mem := m.Bytes()
	ping, pong := at[atomic.Uint64](mem, 0), at[atomic.Uint64](mem, 2*LineSize)
	h := newHist()
	for i := uint64(1); i <= uint64(count); i++ {
		t0 := time.Now().UnixNano()
		ping.Store(i)                                 // pairs with the child's ping load
		for k := 0; pong.Load() != i && k >= 0; k++ { // pairs with the child's pong store
			if k&0xfffff == 0xfffff {
				runtime.Gosched()
			}
		}
		_ = h.RecordValue((time.Now().UnixNano() - t0) / 2)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return histQuants(h)
}

// BenchmarkJitterProbe: two spinning threads follow the paced schedule
// (100,000 points a second) and record how late they notice each point:
// the platform's own jitter, the ceiling any spinning pair can reach.
func BenchmarkJitterProbe(b *testing.B) {
	b.ResetTimer()
	q := jitterProbe(b.N)
	b.StopTimer()
	q.report(b, "")
}

func jitterProbe(count int) quants {
	hs := []*hdrhistogram.Histogram{newHist(), newHist()}
	period := int64(time.Second) / pacedRate
	start := time.Now().UnixNano() + int64(time.Millisecond)
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for i := 0; i < count; i++ {
				intended := start + int64(i)*period
				now := time.Now().UnixNano()
				for now < intended {
					now = time.Now().UnixNano()
				}
				_ = h.RecordValue(now - intended + 1)
			}
		}()
	}
	wg.Wait()
	hs[0].Merge(hs[1])
	return histQuants(hs[0])
}

// BenchmarkLatencyRatios runs the floor, the jitter probe, the ring across
// processes (paced, and one in flight: "ring1") and a Go channel back to
// back on b.N ticks each, and reports
// every figure and the target ratios from that one run: ring p50 / floor
// p50 (target <= 2), ring p99 and p99.9 / jitter p99 and p99.9 (target
// <= 1.25), and the channel's against the ring's.
func BenchmarkLatencyRatios(b *testing.B) {
	floor := floorLatency(b, b.N)
	jitter := jitterProbe(b.N)
	ringQ := ringLatency(b, b.N)
	one := ringLatencyOneInFlight(b, b.N)
	ch := chanLatency(b.N)
	floor.report(b, "floor-")
	jitter.report(b, "jitter-")
	ringQ.report(b, "ring-")
	one.report(b, "ring1-")
	ch.report(b, "chan-")
	b.ReportMetric(ringQ[0]/floor[0], "ring/floor-p50")
	b.ReportMetric(one[0]/floor[0], "ring1/floor-p50")
	b.ReportMetric(ringQ[1]/jitter[1], "ring/jitter-p99")
	b.ReportMetric(ringQ[2]/jitter[2], "ring/jitter-p99.9")
	b.ReportMetric(ringQ[3]/jitter[3], "ring/jitter-p99.99")
	b.ReportMetric(ch[0]/ringQ[0], "chan/ring-p50")
}

// BenchmarkThroughput_CrossProcess: one publisher process, one subscriber
// process, reliable ring (nothing lost), 64-byte ticks as fast as they go;
// single claims and 32-tick batched claims. One op is one tick delivered.
func BenchmarkThroughput_CrossProcess(b *testing.B) {
	for _, how := range []string{"plain", "batch"} {
		b.Run(map[string]string{"plain": "single", "batch": "batch32"}[how], func(b *testing.B) {
			n := strconv.Itoa(b.N)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			pt := startTopic(b, ctx,
				[]subSpec{{args: []string{"-mode", "reliable", "-slots", "16384", "-end", n, "-idle", "backoff", "-limit", "9m"}}},
				[]pubSpec{{args: []string{"-claim", "cas", "-how", how, "-n", n, "-size", "64", "-timeout", "30s"}}})
			b.ResetTimer()
			pt.goAll()
			s := kv(pt.subs[0].expect(b, "DONE", 9*time.Minute))
			b.StopTimer()
			p := kv(pt.pubs[0].expect(b, "DONE", time.Minute))
			pt.exitAll()
			if s["delivered"] != n || s["events"] != "-" || p["published"] != n {
				b.Fatalf("sub %v pub %v", s, p)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
			// CPU time of each whole process (start-up and wiring included)
			// over the ticks: what a tick costs each side, whatever CPU
			// share the shared host gave them.
			for _, c := range []struct {
				p    *proc
				unit string
			}{{pt.pubs[0], "pub-cpu-ns/tick"}, {pt.subs[0], "sub-cpu-ns/tick"}} {
				if ps := c.p.cmd.ProcessState; ps != nil {
					b.ReportMetric(float64(ps.UserTime()+ps.SystemTime())/float64(b.N), c.unit)
				}
			}
		})
	}
}
