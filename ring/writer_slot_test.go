package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma/tcp"
)

// Over tcp a single tick goes to each target in one PostSlot call (no
// work requests), allocates nothing, and lands as the chain would: every
// tick of a reliable and of a lossy ring delivered, in order, intact.
func TestWriter_OverTCP_SingleTickTakesPostSlot(t *testing.T) {
	dev, err := tcp.Open(tcp.Config{HostID: "test-host"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	tp := newTopoOn(t, dev, HomeConfig{JournalSlots: 64}, WriterConfig{Timeout: 5 * time.Second})
	reliable := tp.addRing(RingConfig{Slots: 4096, Mode: Reliable})
	lossy := tp.addRing(RingConfig{Slots: 4096, Mode: Lossy})
	for _, tg := range tp.w.targets.Load().all {
		require.NotNil(t, tg.sp, "target %d: the tcp QP is a slotPoster", tg.id)
	}
	payload := make([]byte, 64)
	allocs := testing.AllocsPerRun(500, func() {
		if _, err := tp.w.Publish(1, payload, 5); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "allocs per publish over tcp")
	n := uint64(1000)
	var base uint64
	for i := uint64(1); i <= n; i++ {
		seq, err := tp.w.Publish(1, payloadFor(i, int(i%60)+1), int64(i))
		require.NoError(t, err)
		if i == 1 {
			base = seq - 1
		}
		require.Equal(t, base+i, seq)
	}
	last := base + n
	for _, r := range []*Ring{reliable, lossy} {
		var c collector
		pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() > last })
		require.Empty(t, c.events)
		var got []Tick
		for _, tk := range c.ticks {
			if tk.Seq > base {
				got = append(got, tk)
			}
		}
		require.Len(t, got, int(n))
		for j, tk := range got {
			i := uint64(j + 1)
			require.Equal(t, base+i, tk.Seq)
			require.Equal(t, payloadFor(i, int(i%60)+1), tk.Payload)
		}
	}
}

// BenchmarkPublish_OverTCP is a single-tick Publish into one lossy ring
// over tcp (the home's counter and journal mapped, as at a home; the ring
// on another device, no reader), "slot" through PostSlot, "chain" through
// work requests (PostSendBatch). cpu-ns/op is the process's CPU per tick,
// both ends of the socket: the poster, its flusher and reaper, the ring's
// responder. In one process the two sit within this VM's noise of each
// other (1.0-1.5 µs a tick, most of it the socket and the goroutines'
// wake-ups); across processes (tickbus bench) the poster is the hot
// thread and slot moved it.
func BenchmarkPublish_OverTCP(b *testing.B) {
	for _, path := range []string{"slot", "chain"} {
		b.Run(path, func(b *testing.B) {
			dev, err := tcp.Open(tcp.Config{HostID: "bench-host", DirectLoopback: true})
			require.NoError(b, err)
			b.Cleanup(func() { _ = dev.Close() })
			tp := newTopoOn(b, dev, HomeConfig{JournalSlots: 4096}, WriterConfig{Timeout: 5 * time.Second})
			// The ring on a device of its own: a peer the home's device
			// cannot map, whose WRITEs cross the socket, as a subscriber
			// process's.
			sub, err := tcp.Open(tcp.Config{HostID: "bench-host"})
			require.NoError(b, err)
			b.Cleanup(func() { _ = sub.Close() })
			rcq := newCQ(b, sub, 8192)
			r, err := NewRing(sub, RingConfig{Slots: 1 << 14, Mode: Lossy, CQ: rcq})
			require.NoError(b, err)
			b.Cleanup(func() { _ = r.Close() })
			wq, _ := qpPairDepth(b, dev, tp.w.cq, sub, rcq, 2048) // the link layer's depth for a tcp writer
			_, err = tp.w.AddTarget(Target{ID: 1, QP: wq, Ring: r.Desc()})
			require.NoError(b, err)
			require.False(b, tp.w.targets.Load().direct, "the ring is written through its QP")
			if path == "chain" {
				for _, tg := range tp.w.targets.Load().all {
					tg.sp = nil
				}
			}
			payload := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuNow()
			for i := 0; i < b.N; i++ {
				if _, err := tp.w.Publish(1, payload, int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, tp.w.Flush())
			b.StopTimer()
			reportCPU(b, c0)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
		})
	}
}
