package ring

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPoll_Batch is the reader's per-tick cost when a poll delivers a
// run (what a subscriber that keeps up with a flood does): ticks published
// outside the timer in chunks of 4096, then polled in runs of 256 (the
// bench's WithBatch). ns and cpu-ns are per tick.
func BenchmarkPoll_Batch(b *testing.B) {
	for _, mode := range []Mode{Lossy, Reliable} {
		for _, ss := range benchSlotSizes {
			b.Run(fmt.Sprintf("%s/slot=%d", mode, ss), func(b *testing.B) { benchPollBatch(b, mode, ss) })
		}
	}
}

func benchPollBatch(b *testing.B, mode Mode, slotSize int) {
	tp := newTopo(b, HomeConfig{SlotSize: slotSize}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1 << 13, SlotSize: slotSize, Mode: mode, MaxBatch: 256})
	rd := r.Reader()
	payload := make([]byte, 64)
	h := &nopHandler{}
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for done := 0; done < b.N; {
		b.StopTimer()
		k := min(4096, b.N-done)
		for range k {
			if _, err := tp.w.Publish(1, payload, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuNow()
		for got := 0; got < k; {
			got += rd.Poll(h)
		}
		cpu += cpuNow() - c0
		done += k
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	if h.events != 0 || h.ticks != b.N {
		b.Fatalf("%d events, %d of %d ticks", h.events, h.ticks, b.N)
	}
}

// BenchmarkPubSub_ReadPayload is BenchmarkPubSub's direct case with a
// handler that reads every payload word, as a decoder does: a 64-byte
// payload puts the slot's second cache line on the subscriber's path
// (BenchmarkPubSub's handler only counts).
func BenchmarkPubSub_ReadPayload(b *testing.B) {
	for _, batch := range []int{1, 32} {
		for _, ss := range benchSlotSizes {
			b.Run(fmt.Sprintf("%s/slot=%d", map[int]string{1: "single", 32: "batch32"}[batch], ss), func(b *testing.B) {
				tp, r := benchTopoSlot(b, 0, Reliable, 1<<12, ss, WriterConfig{Timeout: 10 * time.Second})
				benchPubSub(b, tp.w, r.Reader(), batch, &payloadHandler{})
			})
		}
	}
}

// payloadHandler sums every 8-byte word of the payloads it gets.
type payloadHandler struct {
	sum    uint64
	events int
}

func (h *payloadHandler) OnTicks(ts []Tick) {
	for i := range ts {
		p := ts[i].Payload
		for k := 0; k+8 <= len(p); k += 8 {
			h.sum += binary.LittleEndian.Uint64(p[k:])
		}
	}
}
func (h *payloadHandler) OnEvent(Event)   { h.events++ }
func (h *payloadHandler) eventCount() int { return h.events }
