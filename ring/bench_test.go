package ring

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// cpuNow is this process's CPU time (user + system). On a shared host
// ns/op mostly measures the CPU share the benchmark got; cpu-ns/op (CPU
// time over b.N) is what the code costs.
func cpuNow() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64(cpuNow()-c0)/float64(b.N), "cpu-ns/op")
}

// In-process benchmarks: real shm device, loopback QPs, as across
// processes. Run: go test -run XXX -bench . -benchtime 2000000x ./ring/

func benchTopo(b *testing.B, journal int, mode Mode, slots int, wc WriterConfig) (*topo, *Ring) {
	return benchTopoSlot(b, journal, mode, slots, 0, wc)
}

// benchTopoSlot is benchTopo with slotSize-byte slots in the home's journal
// and the ring (0: the default, 128).
func benchTopoSlot(b *testing.B, journal int, mode Mode, slots, slotSize int, wc WriterConfig) (*topo, *Ring) {
	tp := newTopo(b, HomeConfig{JournalSlots: journal, SlotSize: slotSize}, wc)
	r := tp.addRing(RingConfig{Slots: slots, SlotSize: slotSize, Mode: mode, MaxBatch: 1024})
	return tp, r
}

// benchSlotSizes are the slot sizes the pub/sub benchmarks run with a
// 64-byte payload: 96 (the bench's and the CLI's: 1.5 cache lines per
// tick) and 128 (two lines, version 1's smallest for it).
var benchSlotSizes = []int{96, 128}

// BenchmarkPublish is claim + write + stamp into one lossy ring with no
// reader: the uncontended cost of one tick (CAS claim from the cached value).
func BenchmarkPublish(b *testing.B) {
	forPaths(b, benchPublish)
}

// forPaths runs f as b's sub-benchmarks "generic" (work requests through
// QPs and their completions), "direct" (direct.go; on shm) and "solo"
// (direct, the home's lone writer claiming from runs: solo.go).
func forPaths(b *testing.B, f func(b *testing.B, wc WriterConfig)) {
	for _, p := range writerPaths {
		b.Run(p.name, func(b *testing.B) { f(b, p.wc) })
	}
}

// writerPaths are the writer's paths: the generic one, direct, and solo
// (the lean path, writer_lean.go).
var writerPaths = []struct {
	name string
	wc   WriterConfig
}{{"generic", WriterConfig{Generic: true}}, {"direct", WriterConfig{}}, {"solo", WriterConfig{SoloHome: soloHere}}}

func benchPublish(b *testing.B, wc WriterConfig) {
	for _, c := range []struct {
		name    string
		journal int
		mode    Mode
		claim   ClaimMode
		slots   int
	}{
		{"lossy-cas", 0, Lossy, ClaimCAS, 1 << 16},
		{"lossy-faa", 0, Lossy, ClaimFAA, 1 << 16},
		{"lossy-cas+journal", 4096, Lossy, ClaimCAS, 1 << 16},
		// A ring of 512 KiB (the others: 8 MiB) whose lines stay in the
		// cache: what cold ring lines cost the ones above.
		{"lossy-cas/slots=4096", 0, Lossy, ClaimCAS, 1 << 12},
		// As the product's home publisher runs: a lease end set (each
		// claim reads the TSC) and the default journal.
		{"lossy-cas/slots=4096+journal+lease", 4096, Lossy, ClaimCAS, 1 << 12},
		{"lossy-cas/slots=4096+journal", 4096, Lossy, ClaimCAS, 1 << 12},
		{"lossy-cas/slots=4096+lease", 0, Lossy, ClaimCAS, 1 << 12},
	} {
		b.Run(c.name, func(b *testing.B) {
			wc.Claim = c.claim
			tp, _ := benchTopo(b, c.journal, c.mode, c.slots, wc)
			if strings.HasSuffix(c.name, "+lease") {
				tp.w.SetLeaseEnd(time.Now().Add(time.Hour))
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
			b.StopTimer()
			reportCPU(b, c0)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
		})
	}
}

// BenchmarkPublishFanOut is single-tick Publish into N lossy rings with no
// readers: cpu-ns/op grows by what each extra subscriber costs the
// publisher (target: at most 15 ns per subscriber).
//
// "cq=own" gives each target QP a CQ of its own, as the product's link.Open
// does; "cq=shared" puts them all on the writer's CQ.
func BenchmarkPublishFanOut(b *testing.B) { forPaths(b, benchPublishFanOut) }

func benchPublishFanOut(b *testing.B, wc WriterConfig) {
	type fanCase struct {
		cq       string
		slots, n int
	}
	var cases []fanCase
	// slots=4096: the subscriber package's default ring (512 KiB), which
	// the cross-process fan-out runs use too; 16384 (2 MiB each, the
	// CLI's default): eight of them miss the L2 on every tick.
	for _, k := range []struct {
		cq    string
		slots int
	}{{"shared", 1 << 14}, {"own", 1 << 14}, {"own", 1 << 12}} {
		for _, n := range []int{1, 2, 4, 8} {
			cases = append(cases, fanCase{k.cq, k.slots, n})
		}
	}
	for _, c := range cases {
		n := c.n
		name := fmt.Sprintf("cq=%s/subs=%d", c.cq, n)
		if c.slots != 1<<14 {
			name = fmt.Sprintf("cq=%s/slots=%d/subs=%d", c.cq, c.slots, n)
		}
		b.Run(name, func(b *testing.B) {
			tp := newTopo(b, HomeConfig{}, wc)
			for i := 0; i < n; i++ {
				if c.cq == "shared" {
					tp.addRing(RingConfig{Slots: c.slots, Mode: Lossy})
					continue
				}
				r, err := NewRing(tp.dev, RingConfig{Slots: c.slots, Mode: Lossy, CQ: tp.rcq})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = r.Close() })
				cq := newCQ(b, tp.dev, 8192)
				wq, _ := qpPair(b, tp.dev, cq, tp.dev, tp.rcq)
				if _, err := tp.w.AddTarget(Target{ID: uint64(i), QP: wq, CQ: cq, Ring: r.Desc()}); err != nil {
					b.Fatal(err)
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
			b.StopTimer()
			reportCPU(b, c0)
		})
	}
}

// BenchmarkPublishBatch is the same with batched claims (32 per claim);
// one op is one tick.
func BenchmarkPublishBatch(b *testing.B) { forPaths(b, benchPublishBatch) }

func benchPublishBatch(b *testing.B, wc WriterConfig) {
	// slots=4096: a ring whose lines stay in the cache, as BenchmarkSlotFloor's.
	for _, slots := range []int{1 << 16, 1 << 12} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			tp, _ := benchTopo(b, 0, Lossy, slots, wc)
			batch := make([]Tick, 32)
			for i := range batch {
				batch[i].Payload = make([]byte, 64)
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cpuNow()
			for i := 0; i < b.N; i += len(batch) {
				if _, err := tp.w.PublishBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportCPU(b, c0)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
		})
	}
}

// BenchmarkPoll is one poll delivering one tick (published outside the
// timer in chunks).
func BenchmarkPoll(b *testing.B) {
	for _, mode := range []Mode{Lossy, Reliable} {
		b.Run(mode.String(), func(b *testing.B) {
			tp, r := benchTopo(b, 0, mode, 1<<12, WriterConfig{})
			rd := r.Reader()
			rd.maxBatch = 1
			payload := make([]byte, 64)
			h := &nopHandler{}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for i := 0; i < b.N; i += 1024 {
				b.StopTimer()
				for k := 0; k < 1024; k++ {
					if _, err := tp.w.Publish(1, payload, 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				c0 := cpuNow()
				for k := 0; k < 1024; k++ {
					rd.Poll(h)
				}
				cpu += cpuNow() - c0
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			if h.events != 0 {
				b.Fatalf("%d events", h.events)
			}
		})
	}
}

// BenchmarkPubSub is one publisher goroutine and one reader goroutine on a
// reliable ring of 4096 slots (nothing lost; the size the bench's
// cross-process runs use), single and batched claims: ticks per second,
// with the slot lines moving between two cores as across processes. The
// "solo+journal+lease" cases are the product's lone home publisher (solo
// claims, the default journal, a lease end set: the lean path).
func BenchmarkPubSub(b *testing.B) {
	for _, p := range []struct {
		name    string
		wc      WriterConfig
		journal int
		lease   bool
	}{
		{"direct", WriterConfig{}, 0, false},
		{"solo+journal+lease", WriterConfig{SoloHome: soloHere}, 4096, true},
	} {
		for _, batch := range []int{1, 32} {
			for _, ss := range benchSlotSizes {
				b.Run(fmt.Sprintf("%s/%s/slot=%d", p.name, map[int]string{1: "single", 32: "batch32"}[batch], ss), func(b *testing.B) {
					wc := p.wc
					wc.Timeout = 10 * time.Second
					tp, r := benchTopoSlot(b, p.journal, Reliable, 1<<12, ss, wc)
					if p.lease {
						tp.w.SetLeaseEnd(time.Now().Add(time.Hour))
					}
					benchPubSub(b, tp.w, r.Reader(), batch, &nopHandler{})
				})
			}
		}
	}
}

func benchPubSub(b *testing.B, w *Writer, rd *Reader, batch int, h counter) {
	ticks := make([]Tick, batch)
	for i := range ticks {
		ticks[i].Payload = make([]byte, 64)
	}
	n := rd.Next() - 1 + uint64(b.N)
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	go func() {
		defer close(done)
		var idle rdma.Yield
		for rd.Next() <= n {
			idle.Idle(rd.Poll(h))
		}
	}()
	for sent := 0; sent < b.N; {
		k := min(batch, b.N-sent)
		// As a feed encodes each message just before it publishes it
		// (PublishTick, the bench's harness): word stores the payload
		// copy then loads, perhaps still in the store buffer.
		for i := range ticks[:k] {
			encodeWords(ticks[i].Payload, uint64(sent+i))
		}
		var err error
		if batch == 1 {
			_, err = w.Publish(1, ticks[0].Payload, 0)
		} else {
			_, err = w.PublishBatch(ticks[:k])
		}
		if err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	<-done
	b.StopTimer()
	reportCPU(b, c0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
	if ev := h.eventCount(); ev != 0 {
		b.Fatalf("%d events", ev)
	}
}

// encodeWords writes p (a multiple of 8 bytes) as an encoder does: one
// 8-byte store per word.
func encodeWords(p []byte, v uint64) {
	for i := 0; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], v+uint64(i))
	}
}

// counter is a benchmark's handler that counts the events it got.
type counter interface {
	Handler
	eventCount() int
}

func (h *nopHandler) eventCount() int { return h.events }

// BenchmarkSlotFloor is the in-process floor of a single-tick Publish:
// header, 64-byte payload and stamp stored straight into a mapped-size
// ring of 4096 128-byte slots (as BenchmarkPublish's slots=4096 case),
// with no claim, no checks and no bookkeeping. What BenchmarkPublish
// costs beyond it is the writer's own per-tick work.
func BenchmarkSlotFloor(b *testing.B) {
	const slots, slotSize = 1 << 12, 128
	mem := make([]byte, slots*slotSize+64)
	off0 := int(-uintptr(unsafe.Pointer(&mem[0])) & 63)
	mem = mem[off0 : off0+slots*slotSize]
	payload := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	for i := 0; i < b.N; i++ {
		seq := uint64(i + 1)
		off := (seq & (slots - 1)) * slotSize
		s := mem[off : off+slotSize : off+slotSize]
		h := (*slotHeader)(unsafe.Pointer(&s[0]))
		stampStore(&h.Stamp, StampBusy)
		h.PublishNs, h.Len, h.Type, h.Flags, h.Publisher = int64(i), uint32(len(payload)), 1, 0, 7
		h.Check = headerCheck(seq, int64(i), uint32(len(payload)), 1, 0, 7, payload)
		copy(s[SlotHeaderSize:], payload)
		stampStore(&h.Stamp, seq)
	}
	b.StopTimer()
	reportCPU(b, c0)
}
