package publisher_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/membarrier"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// A lone publisher of a topic is its home, with the defaults (journal,
// lease end): its writer claims solo (where membarrier(2) works) and
// writes every ring directly, the lean path (ring's writer_lean.go), and a
// publish allocates nothing.
func TestPublisher_LoneHome_LeanPathZeroAllocs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "lean")
	p, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "lean", ID: "p", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	payload := make([]byte, tick.Size)
	_, err = p.Publish(tick.MessageType, payload, 1)
	require.NoError(t, err)
	st := p.Stats()
	assert.Equal(t, membarrier.Available(), st.Solo, "the lone home publisher claims solo where membarrier(2) works")
	assert.True(t, st.DirectClaim)
	assert.Equal(t, st.Targets, st.Direct, "every ring mapped")
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := p.Publish(tick.MessageType, payload, 1); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	batch := make([]ring.Tick, 16)
	for i := range batch {
		batch[i] = ring.Tick{Type: tick.MessageType, Payload: payload}
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := p.PublishBatch(batch); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	r.drain()
}

// BenchmarkPublisher_Publish is the product's single-tick and batched
// publish (a lone home publisher with the defaults: journal, lease end,
// one lossy subscriber on the same node that does not read, so nothing
// waits): ns, cpu-ns (the publishing thread's own CPU: the subscriber's
// poller spins on another) and allocs per tick.
func BenchmarkPublisher_Publish(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newRigB(b, ctx, "benchpub")
	p, err := publisher.New(ctx, r.node, r.devs, publisher.Config{Topic: "benchpub", ID: "p", Idle: rdma.Yield{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.WaitSubscribers(ctx, 1); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, tick.Size)
	for _, n := range []int{1, 32} {
		name := map[int]string{1: "single", 32: "batch32"}[n]
		b.Run(name, func(b *testing.B) {
			batch := make([]ring.Tick, n)
			for i := range batch {
				batch[i] = ring.Tick{Type: tick.MessageType, Payload: payload}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := threadCPU()
			for i := 0; i < b.N; i += n {
				var err error
				if n == 1 {
					_, err = p.Publish(tick.MessageType, payload, int64(i))
				} else {
					_, err = p.PublishBatch(batch)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// newRigB is newRig for a benchmark.
func newRigB(b *testing.B, ctx context.Context, topic string) *rig {
	b.Helper()
	node, err := bus.Open(ctx, bus.Config{NodeID: "n-" + topic})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	b.Cleanup(func() { devs.Close() })
	h := &seqs{}
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: topic, StatsInterval: -1}, h)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sub.Close() })
	return &rig{node: node, devs: devs, sub: sub, h: h}
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
