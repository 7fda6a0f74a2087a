package ring

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A slot whose stamp and header are one lap's and whose payload holds
// bytes of another tick (an older lap's writer landing its payload under
// the newer stamp, or any corruption) is a corrupt sequence, named by an
// event, and never a tick: before layout version 3 the header check did
// not cover the payload and the reader handed such a tick out.
func TestReader_PayloadOfAnotherTickUnderAWholeHeader_IsCorruptNotDelivered(t *testing.T) {
	for _, mode := range []Mode{Lossy, Reliable} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{}, WriterConfig{MaxPayload: 64})
			rd := tp.addRing(RingConfig{Slots: 64, SlotSize: 96, Mode: mode, GapTimeout: 20 * time.Millisecond}).Reader()
			_, err := tp.w.Publish(0, payloadFor(1, 64), 0)
			require.NoError(t, err)
			off := int(1&rd.mask) * rd.slotSize
			// 24 bytes from the middle of another tick's payload, the stamp
			// and the header untouched
			copy(rd.slots[off+SlotHeaderSize+20:off+SlotHeaderSize+44], payloadFor(3, 64)[20:44])
			require.Equal(t, uint64(1), stampAt(rd.slots, off).Load())
			var c collector
			pollUntil(t, rd, &c, func() bool { return rd.Next() > 1 })
			assert.Empty(t, c.ticks)
			require.Equal(t, []Event{{Kind: EventCorrupt, From: 1, To: 1}}, c.events)
			assert.Equal(t, uint64(1), rd.Stats().Corrupt)
			_, err = tp.w.Publish(0, payloadFor(2, 64), 0)
			require.NoError(t, err)
			pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 1 })
			assert.Equal(t, uint64(2), c.ticks[0].Seq)
			assert.Equal(t, payloadFor(2, 64), c.ticks[0].Payload)
		})
	}
}

// Two writers on one lossy ring, one a whole lap behind the other: the
// lagging one (written by hand here, as a publisher whose tcp queue or
// descheduled thread held its frames back) rewrites every slot the leading
// one has just stamped with its own tick of the previous lap, StampBusy,
// header, payload, stamp, racing the leader and the reader. Every tick the
// reader hands out must be exactly a tick some writer published for its
// sequence. With the header check alone, a tick of the leader's header
// over bytes of both payloads was delivered (the chaos test's "one
// sequence carried two different ticks").
func TestReader_WriterALapBehindRacingTheLeader_NeverDeliversATornTick(t *testing.T) {
	const slots, size = 64, 64
	tp := newTopo(t, HomeConfig{}, WriterConfig{MaxPayload: size})
	rd := tp.addRing(RingConfig{Slots: slots, SlotSize: SlotHeaderSize + size, Mode: Lossy}).Reader()
	run := 300 * time.Millisecond
	if testing.Short() {
		run = 100 * time.Millisecond
	}
	var stop atomic.Bool
	var lagged atomic.Uint64
	done := make(chan struct{})
	// One goroutine plays both writers (this machine may have two cores,
	// and the reader needs the other): the leader, a lone writer, so its
	// i-th tick is seq i, and, every fourth tick, the laggard.
	go func() {
		defer close(done)
		publish := func(seq uint64) bool {
			if _, err := tp.w.Publish(0, payloadFor(seq, size), 0); err != nil {
				t.Errorf("publish %d: %v", seq, err)
				return false
			}
			// paced (a tick every 2 µs or so), so the reader keeps up and
			// reads the slots as they land
			for t0 := time.Now(); time.Since(t0) < 2*time.Microsecond; {
			}
			return true
		}
		body := make([]byte, SlotHeaderSize-offBody)
		for seq := uint64(1); !stop.Load(); seq++ {
			if seq <= slots || seq%4 != 0 {
				if !publish(seq) {
					return
				}
				continue
			}
			// The laggard begins its tick of the previous lap in seq's
			// slot late: StampBusy, and then its frame is held back
			// while the leader writes seq there, whose stamp lands over
			// the StampBusy...
			old := seq - slots
			off := int(seq&rd.mask) * rd.slotSize
			stampAt(rd.slots, off).Store(StampBusy)
			if !publish(seq) {
				return
			}
			// ... and then its frame lands, over some hundreds of
			// nanoseconds, in no particular order within the WRITE (a
			// NIC's DMA has none): its payload a byte at a time, then its
			// header. Its stamp's WRITE is left in flight: the stale stamp
			// would stall the reader at this slot until the leader's next
			// lap, and a stalled reader reads no other landing.
			p := payloadFor(old, size)
			for i, c := range p {
				rd.slots[off+SlotHeaderSize+i] = c
				for t0 := time.Now(); time.Since(t0) < 10*time.Nanosecond; {
				}
			}
			putBody(body, old, 0, size, 0, 0, 0, p)
			copy(rd.slots[off+offBody:], body)
			lagged.Add(1)
		}
	}()
	torn, delivered := 0, 0
	h := handlerFunc(func(ts []Tick) {
		for _, tk := range ts {
			delivered++
			if !bytes.Equal(tk.Payload, payloadFor(tk.Seq, size)) {
				torn++
				if torn <= 3 {
					t.Errorf("seq %d delivered a payload no writer published for it: %x", tk.Seq, tk.Payload)
				}
			}
		}
	})
	rng := rand.New(rand.NewPCG(5, 6))
	for end := time.Now().Add(run); time.Now().Before(end); {
		rd.Poll(h)
		// a poll every few hundred nanoseconds, at no fixed phase to
		// the writers'
		for t0, d := time.Now(), time.Duration(rng.IntN(1000)); time.Since(t0) < d; {
		}
	}
	stop.Store(true)
	<-done
	st := rd.Stats()
	t.Logf("delivered %d, torn %d; laggard frames %d; reader: corrupt %d, torn copies %d, overrun %d",
		delivered, torn, lagged.Load(), st.Corrupt, st.Torn, st.Overrun)
	require.NotZero(t, lagged.Load(), "the laggard never wrote: the test tested nothing")
	assert.Zero(t, torn)
}

// payloadSum's properties headerCheck relies on for torn payloads, over
// random payloads of every length up to 200 bytes (a fixed seed, so the
// test is the same every run): a payload made of two payloads' bytes
// (cut at any byte, or a run of the other's bytes in the middle), any
// single bit flipped, and two 16-byte blocks swapped all change the sum.
func TestPayloadSum_CatchesMixedPayloadsFlippedBitsAndSwappedBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	misses := 0
	miss := func(format string, args ...any) {
		misses++
		t.Errorf(format, args...)
		if misses > 10 {
			t.FailNow()
		}
	}
	assert.Zero(t, payloadSum(nil))
	for n := 1; n <= 200; n++ {
		for range 8 {
			a, b := fill(n), fill(n)
			sa, sb := payloadSum(a), payloadSum(b)
			for cut := 1; cut < n; cut++ { // a's head, b's tail: a writer's copy over another's
				m := append(append([]byte{}, a[:cut]...), b[cut:]...)
				if bytes.Equal(m, a) || bytes.Equal(m, b) {
					continue // the bytes at the cut were equal
				}
				if s := payloadSum(m); s == sa || s == sb {
					miss("n=%d: a[:%d]+b[%d:] sums like a or b", n, cut, cut)
				}
			}
			i, j := rng.IntN(n), rng.IntN(n)
			if i > j {
				i, j = j, i
			}
			if !bytes.Equal(a[i:j+1], b[i:j+1]) {
				m := append([]byte{}, a...)
				copy(m[i:j+1], b[i:j+1])
				if payloadSum(m) == sa {
					miss("n=%d: b's bytes %d..%d in a sum like a", n, i, j)
				}
			}
			for bit := 0; bit < 8*n; bit += 1 + rng.IntN(7) {
				m := append([]byte{}, a...)
				m[bit/8] ^= 1 << (bit % 8)
				if payloadSum(m) == sa {
					miss("n=%d: bit %d flipped sums like the original", n, bit)
				}
			}
			if n >= 32 {
				k := 16 * (1 + rng.IntN(n/16-1))
				m := append([]byte{}, a...)
				copy(m[:16], a[k:k+16])
				copy(m[k:k+16], a[:16])
				if !bytes.Equal(m, a) && payloadSum(m) == sa {
					miss("n=%d: blocks 0 and %d swapped sum like the original", n, k/16)
				}
			}
		}
		// equal blocks at two offsets do not cancel
		z := make([]byte, n)
		if n >= 32 && payloadSum(z) == 0 {
			miss("n=%d: zeros sum to 0", n)
		}
	}
	// headerCheck takes the sum: the same header over two payloads differs
	p := fill(64)
	q := append([]byte{}, p...)
	q[63] ^= 0x80
	assert.NotEqual(t, headerCheck(9, 1, 64, 1, 0, 2, p), headerCheck(9, 1, 64, 1, 0, 2, q))
}

type handlerFunc func([]Tick)

func (f handlerFunc) OnTicks(ts []Tick) { f(ts) }
func (f handlerFunc) OnEvent(Event)     {}

// BenchmarkPayloadSum: what headerCheck's payload part costs a writer and
// a reader per tick, by payload size.
func BenchmarkPayloadSum(b *testing.B) {
	for _, n := range []int{8, 64, 256, 1024} {
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) {
			p := payloadFor(3, n)
			var s uint64
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				s += payloadSum(p)
			}
			sumSink = s
		})
	}
}

var sumSink uint64
