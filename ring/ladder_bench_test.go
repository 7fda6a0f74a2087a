package ring

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// BenchmarkLadder climbs from the bare pattern (plain stores into a ring of
// 96-byte slots, a reader spinning on the stamp: the lead's exp-ring) to
// the product's lean Publish, one step at a time, on the same topology:
// one writer goroutine and one reader goroutine, 4096 reliable slots of
// 96 bytes in a shm region, single-tick, the reader idling with rdma.Yield
// as the bench's default does. What a step costs over the one below it is
// what tickbus adds there.
//
//	bare/1ring        header, payload and stamp stored into the ring; bare reader
//	bare/2ring        the same tick stored into the home's journal too
//	bare+Reader/...   the bare writer(s) with ring.Reader.Poll as the reader
//	Publish/nojournal Writer.Publish, solo home, lease set; ring.Reader
//	Publish/journal   the same with the default journal (the product's path)
//
// pin=1 locks the writer to CPU 0 and the reader to CPU 1 (as exp-ring);
// pin=0 leaves them to the scheduler, as tickbus bench does by default.
func BenchmarkLadder(b *testing.B) {
	const slots, ss = 1 << 12, 96
	for _, pin := range []bool{true, false} {
		for _, st := range []struct {
			name    string
			journal int
			bare    bool
			reader  bool // ring.Reader, not the bare one
		}{
			{"bare/1ring", 0, true, false},
			{"bare/2ring", 4096, true, false},
			{"bare+Reader/1ring", 0, true, true},
			{"bare+Reader/2ring", 4096, true, true},
			{"bare+Reader/1ring+6stores", 0, true, true},
			{"Publish/nojournal", 0, false, true},
			{"Publish/journal", 4096, false, true},
			{"PublishBatch64/nojournal", 0, false, true},
			{"PublishBatch64/journal", 4096, false, true},
		} {
			b.Run(fmt.Sprintf("%s/pin=%d", st.name, map[bool]int{false: 0, true: 1}[pin]), func(b *testing.B) {
				tp, r := benchTopoSlot(b, st.journal, Reliable, slots, ss, WriterConfig{SoloHome: soloHere, Timeout: 10 * time.Second})
				tp.w.SetLeaseEnd(time.Now().Add(time.Hour))
				rd := r.Reader()
				var jslots []byte
				if st.journal > 0 {
					jslots = tp.home.mr.Bytes()[offJournal:]
				}
				extra, batch := 0, 1
				if strings.HasPrefix(st.name, "PublishBatch64/") {
					batch = 64
				}
				if strings.HasSuffix(st.name, "+6stores") {
					extra = 6
				}
				ladder(b, pin, st.bare, st.reader, extra, batch, tp.w, rd, r.mr.Bytes(), jslots, ss)
			})
		}
	}
}

func pinTo(cpu int, pin bool) {
	runtime.LockOSThread()
	if pin {
		var s unix.CPUSet
		s.Set(cpu)
		_ = unix.SchedSetaffinity(0, &s)
	}
}

func ladder(b *testing.B, pin, bare, useReader bool, extra, batch int, w *Writer, rd *Reader, ring, jslots []byte, ss int) {
	mask := rd.mask
	slotsB := ring[offSlots:]
	head := rd.head
	payload := make([]byte, 64)
	h := &nopHandler{}
	first := rd.Next()
	last := first - 1 + uint64(b.N)
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuNow()
	go func() {
		defer close(done)
		pinTo(1, pin)
		defer runtime.UnlockOSThread()
		var idle rdma.Yield
		if useReader {
			for rd.Next() <= last {
				idle.Idle(rd.Poll(h))
			}
			return
		}
		next, sum := first, uint64(0)
		for next <= last {
			n := 0
			for n < 256 {
				off := int(next&mask) * ss
				if atomic.LoadUint64((*uint64)(unsafe.Pointer(&slotsB[off]))) != next {
					break
				}
				s := (*[12]uint64)(unsafe.Pointer(&slotsB[off]))
				for j := 1; j < 12; j++ {
					sum += s[j]
				}
				next++
				n++
			}
			if n > 0 {
				head.Store(next)
			}
			idle.Idle(n)
		}
		h.ticks = int(sum & 1)
	}()
	pinTo(0, pin)
	defer runtime.UnlockOSThread()
	limit := first + mask + 1
	own := make([]uint64, 16)
	ticks := make([]Tick, batch)
	for i := range ticks {
		ticks[i] = Tick{Type: 1, Payload: make([]byte, 64)}
	}
	for seq := first; batch > 1 && seq <= last; {
		k := min(uint64(batch), last-seq+1)
		for i := range ticks[:k] {
			encodeWords(ticks[i].Payload, seq+uint64(i))
		}
		if _, err := w.PublishBatch(ticks[:k]); err != nil {
			b.Fatal(err)
		}
		seq += k
	}
	for seq := first; batch == 1 && seq <= last; seq++ {
		encodeWords(payload, seq)
		if !bare {
			if _, err := w.Publish(1, payload, int64(seq)); err != nil {
				b.Fatal(err)
			}
			continue
		}
		for seq >= limit {
			limit = head.Load() + mask + 1
		}
		off := int(seq&mask) * ss
		bareSlot(slotsB[off:off+ss:off+ss], seq, payload)
		if jslots != nil {
			bareSlot(jslots[off:off+ss:off+ss], seq, payload)
		}
		for k := 0; k < extra; k++ { // the writer's own words a Publish stores (claim, stats): own lines, L1 hits
			stampStore(&own[k*2], seq)
		}
	}
	<-done
	b.StopTimer()
	reportCPU(b, c0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ticks/s")
	if h.events != 0 {
		b.Fatalf("%d events", h.events)
	}
}

// bareSlot stores a valid tick (ring.Reader accepts it) with plain stores:
// the payload, the header's three words, then the stamp.
func bareSlot(s []byte, seq uint64, p []byte) {
	h := (*slotHeader)(unsafe.Pointer(&s[0]))
	putTail(s, p)
	putHead(s, p)
	bw := (*[3]uint64)(unsafe.Pointer(&h.PublishNs))
	bw[0], bw[1], bw[2] = seq, uint64(len(p))|1<<32, 7|uint64(headerCheck(seq, int64(seq), uint32(len(p)), 1, 0, 7, p))<<32
	stampStore(&h.Stamp, seq)
}
