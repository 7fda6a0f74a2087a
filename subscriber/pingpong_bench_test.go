package subscriber_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
)

// BenchmarkPingPong is a round trip through the whole product path
// (Publisher.Publish, the ring over shm, Subscriber.Poll with its latency
// recording), two topics, each way's poller on a thread of its own: the
// main goroutine publishes on topic A and polls B for the echo; another
// polls A and publishes each tick back on B from its handler. Reliable
// rings of 4096 128-byte slots, 64-byte payloads, busy-spin. In-process,
// across two cores (ring's BenchmarkPingPong is the same without the
// subscriber and publisher layers; tickbus bench --pingpong runs it
// across processes).
func BenchmarkPingPong(b *testing.B) { benchPingPong(b, 0) }

// BenchmarkPingPong_Paced is BenchmarkPingPong with the pinger idle
// (polling its empty ring) until gap after each ping was sent, as a paced
// feed leaves both loops: against gap=0, what the path pays for what went
// cold while its loops only polled (the cross-process ping-pong at 1000/s
// took 4.3 µs against 1.2 at 20,000/s). With a gap, allocs/op counts the
// bus node's own goroutines (heartbeats) over the idle time too: the
// process's allocations, not the path's (gap=0 shows the path's: 0).
func BenchmarkPingPong_Paced(b *testing.B) {
	for _, gap := range []time.Duration{0, 50 * time.Microsecond, time.Millisecond} {
		b.Run("gap="+gap.String(), func(b *testing.B) { benchPingPong(b, gap) })
	}
}

func benchPingPong(b *testing.B, gap time.Duration) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs two Ps: a ping-pong on one spins against itself")
	}
	echo := &echoHandler{}
	pubA, subA := pingRig(b, fmt.Sprintf("ping-a-%d", gap.Nanoseconds()), echo)
	back := &countHandler{}
	pubB, subB := pingRig(b, fmt.Sprintf("ping-b-%d", gap.Nanoseconds()), back)
	echo.p = pubB
	payload := make([]byte, 64)
	n := b.N
	// The echo goroutine polls subA until it has echoed n ticks, failed or
	// been stopped; the Cleanup that closes subA must not run before it has
	// returned (Close while Poll runs elsewhere unmaps the ring under it):
	// every way out of this function waits for echoDone first.
	var stop, exited atomic.Bool
	echoDone := make(chan error, 1)
	go func() {
		defer exited.Store(true)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for echo.n < n && echo.err == nil && !stop.Load() {
			subA.Poll()
		}
		echoDone <- echo.err
	}()
	fail := func(err error) {
		stop.Store(true)
		if eerr := <-echoDone; eerr != nil {
			err = errors.Join(err, eerr)
		}
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hist := hdrhistogram.New(1, int64(time.Second), 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		t0 := time.Now().UnixNano()
		if _, err := pubA.Publish(1, payload, t0); err != nil {
			fail(err)
		}
		for back.n < i {
			subB.Poll()
			if exited.Load() && echo.n < n { // it failed (echo.n is final once it exited)
				fail(fmt.Errorf("the echo loop stopped after %d of %d ticks", echo.n, n))
			}
		}
		t1 := time.Now().UnixNano()
		_ = hist.RecordValue(min(t1-t0, int64(time.Second)))
		for t1 < t0+int64(gap) {
			subB.Poll()
			t1 = time.Now().UnixNano()
		}
	}
	b.StopTimer()
	if err := <-echoDone; err != nil {
		b.Fatal(err)
	}
	if back.events+echo.events != 0 {
		b.Fatalf("%d events", back.events+echo.events)
	}
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99.9)), "p99.9-ns")
}

// pingRig is benchRig with a reliable ring of 128-byte slots (a 64-byte
// payload's, as tickbus bench sizes it) and a batch of 256.
func pingRig(b *testing.B, topic string, h subscriber.Handler) (*publisher.Publisher, *subscriber.Subscriber) {
	return benchRigWith(b, topic, h, func(c *subscriber.Config) {
		c.Mode, c.Slots, c.SlotSize, c.MaxBatch = ring.Reliable, 1<<12, 128, 256
	})
}

// echoHandler publishes every tick it gets with p.
type echoHandler struct {
	p         *publisher.Publisher
	n, events int
	err       error
}

func (e *echoHandler) OnTicks(ts []ring.Tick) {
	for i := range ts {
		if _, err := e.p.Publish(ts[i].Type, ts[i].Payload, ts[i].PublishNs); err != nil && e.err == nil {
			e.err = err
		}
	}
	e.n += len(ts)
}

func (e *echoHandler) OnEvent(ring.Event) { e.events++ }

type countHandler struct{ n, events int }

func (c *countHandler) OnTicks(ts []ring.Tick) { c.n += len(ts) }
func (c *countHandler) OnEvent(ring.Event)     { c.events++ }
