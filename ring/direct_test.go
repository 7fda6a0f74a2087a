package ring

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/membarrier"
	"github.com/tickbus/tickbus/rdma"
)

func skipIfForcedGeneric(t *testing.T) {
	t.Helper()
	if forceGeneric {
		t.Skip("TICKBUS_RING_GENERIC=1: this test is about the direct path")
	}
}

// Both paths deliver the same ticks into lossy and reliable rings and the
// journal; the direct one on shm takes no work request for it.
func TestDirect_UsedOnShm_GenericOnRequest_SameTicks(t *testing.T) {
	skipIfForcedGeneric(t)
	for _, generic := range []bool{false, true} {
		for _, mode := range []Mode{Lossy, Reliable} {
			name := map[bool]string{false: "direct", true: "generic"}[generic] + "/" + mode.String()
			t.Run(name, func(t *testing.T) {
				tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{Generic: generic})
				r := tp.addRing(RingConfig{Slots: 64, Mode: mode})
				st := tp.w.Stats()
				assert.Equal(t, !generic, st.DirectClaim)
				assert.Equal(t, map[bool]int{false: 1, true: 0}[generic], st.Direct)
				for i := 1; i <= 40; i++ {
					seq, err := tp.w.Publish(7, payloadFor(uint64(i), 16), int64(i))
					require.NoError(t, err)
					require.Equal(t, uint64(i), seq)
				}
				batch := make([]Tick, 8)
				for i := range batch {
					batch[i] = Tick{Type: 8, Payload: payloadFor(uint64(41+i), 16)}
				}
				first, err := tp.w.PublishBatch(batch)
				require.NoError(t, err)
				require.Equal(t, uint64(41), first)
				var c collector
				pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 48 })
				assert.Empty(t, c.events)
				for i, tk := range c.ticks {
					assert.Equal(t, uint64(i+1), tk.Seq)
					assert.Equal(t, payloadFor(uint64(i+1), 16), tk.Payload)
				}
				assert.Equal(t, uint64(49), tp.home.Counter())
			})
		}
	}
}

// A slot's payload is written in two parts on the direct paths (from the
// slot's byte 64 on: putTail; then the part beside the header: putHead);
// every length a slot takes arrives whole, single and batched, in the ring
// and in the journal, on the direct and the lean (solo) path and on the
// generic one (work requests through the QPs, a batch's run of slots in
// one WRITE), for slots of 96 bytes (every other one starting half way
// into a cache line), 128 and 160.
func TestDirect_EveryPayloadLength_ArrivesWhole(t *testing.T) {
	skipIfForcedGeneric(t)
	for _, slotSize := range []int{96, 128, 160} {
		t.Run(strconv.Itoa(slotSize), func(t *testing.T) { testEveryPayloadLength(t, slotSize) })
	}
}

func testEveryPayloadLength(t *testing.T, slotSize int) {
	maxLen := slotSize - SlotHeaderSize
	fill := func(seq uint64, n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(seq*31 + uint64(i)*7 + 1)
		}
		return b
	}
	for _, p := range []struct {
		name string
		wc   WriterConfig
	}{{"direct", WriterConfig{}}, {"solo", WriterConfig{SoloHome: soloHere}}, {"generic", WriterConfig{Generic: true}}} {
		for _, mode := range []Mode{Lossy, Reliable} {
			t.Run(p.name+"/"+mode.String(), func(t *testing.T) {
				tp := newTopo(t, HomeConfig{JournalSlots: 512, SlotSize: slotSize}, p.wc)
				r := tp.addRing(RingConfig{Slots: 512, SlotSize: slotSize, Mode: mode})
				want := map[uint64][]byte{}
				for n := 0; n <= maxLen; n++ { // single ticks
					seq := tp.home.Counter()
					pl := fill(seq, n)
					got, err := tp.w.Publish(1, pl, int64(n))
					require.NoError(t, err)
					want[got] = pl
				}
				for n := 0; n <= maxLen; n += 8 { // batches of mixed lengths
					batch := make([]Tick, 4)
					first := tp.home.Counter()
					for i := range batch {
						batch[i] = Tick{Type: 2, Payload: fill(first+uint64(i), (n+i*13)%(maxLen+1))}
					}
					got, err := tp.w.PublishBatch(batch)
					require.NoError(t, err)
					for i := range batch {
						want[got+uint64(i)] = batch[i].Payload
					}
				}
				var c collector
				pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == len(want) })
				require.Empty(t, c.events)
				for _, tk := range c.ticks {
					require.Equal(t, want[tk.Seq], tk.Payload, "seq %d, %d bytes", tk.Seq, len(want[tk.Seq]))
				}
				jm := tp.home.mr.Bytes()[offJournal:]
				for seq, pl := range want {
					var tk Tick
					off := int(seq%512) * slotSize
					require.Equal(t, slotOK, decodeSlot(jm[off:off+slotSize], seq, &tk), "journal slot of %d", seq)
					require.Equal(t, pl, tk.Payload, "journal, seq %d", seq)
				}
			})
		}
	}
}

// The direct claim is fenced exactly as the QP one: by SetLimit, and by
// FenceCounter's FETCH_AND_ADD through a QP on the same counter.
func TestDirect_ClaimFenced_BySetLimitAndFenceCounter(t *testing.T) {
	skipIfForcedGeneric(t)
	for _, claim := range []ClaimMode{ClaimCAS, ClaimFAA} {
		t.Run(claim.String(), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{}, WriterConfig{Claim: claim})
			r := tp.addRing(RingConfig{Slots: 64})
			require.True(t, tp.w.Stats().DirectClaim)
			tp.w.SetLimit(4)
			for i := 1; i <= 3; i++ {
				_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
				require.NoError(t, err)
			}
			_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
			require.ErrorIs(t, err, ErrFenced)
			tp.w.SetLimit(1 << 20)
			fcq := newCQ(t, tp.dev, 16)
			fq, _ := qpPair(t, tp.dev, fcq, tp.dev, tp.homeQ)
			before, err := FenceCounter(tp.dev, fq, fcq, tp.home.Desc(), 2*time.Second)
			require.NoError(t, err)
			_, err = tp.w.Publish(0, payloadFor(before, 8), 0)
			require.ErrorIs(t, err, ErrFenced, "claims after the fence are refused")
			var c collector
			pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) >= 3 })
			time.Sleep(10 * time.Millisecond)
			r.Reader().Poll(&c)
			require.LessOrEqual(t, len(c.ticks), int(before-1), "nothing fenced was written")
			for _, tk := range c.ticks {
				assert.Less(t, tk.Seq, before)
			}
		})
	}
}

// Targets come and go while another goroutine publishes: nothing faults
// (their mappings are released by the publisher, or by Close), the
// surviving ring gets every tick.
func TestDirect_TargetsAddedAndRemovedWhilePublishing(t *testing.T) {
	skipIfForcedGeneric(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	stay := tp.addRing(RingConfig{Slots: 1 << 12, Mode: Reliable})
	const n = 3000
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c nopHandler
		var idle rdma.Yield
		for stay.Reader().Next() <= n && !stop.Load() {
			idle.Idle(stay.Reader().Poll(&c))
		}
	}()
	errc := make(chan error, 1)
	go func() {
		for i := 1; i <= n; i++ {
			if _, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for k := uint64(100); k < 130; k++ {
		r, err := NewRing(tp.dev, RingConfig{Slots: 64, CQ: tp.rcq})
		require.NoError(t, err)
		wq, _ := qpPair(t, tp.dev, tp.w.cq, tp.dev, tp.rcq)
		_, err = tp.w.AddTarget(Target{ID: k, QP: wq, Ring: r.Desc()})
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
		require.NoError(t, tp.w.RemoveTarget(k))
		require.NoError(t, wq.Close())
		require.NoError(t, r.Close())
	}
	require.NoError(t, <-errc)
	stop.Store(true)
	wg.Wait()
	assert.Equal(t, uint64(n+1), stay.Reader().Next())
	assert.Zero(t, stay.Reader().Stats().Gap)
	assert.Equal(t, 1, tp.w.Stats().Targets)
}

// A target whose QP leaves RTS (closed here; a dead peer does the same) is
// dropped at the next publish; a home QP that does breaks the writer. The
// same on the lean path (a solo writer, writer_lean.go), with a journal.
func TestDirect_DeadQPs_TargetDropped_HomeFails(t *testing.T) {
	skipIfForcedGeneric(t)
	t.Run("direct", func(t *testing.T) { testDeadQPs(t, WriterConfig{}, HomeConfig{}) })
	t.Run("lean", func(t *testing.T) { testDeadQPs(t, WriterConfig{SoloHome: soloHere}, HomeConfig{JournalSlots: 64}) })
}

func testDeadQPs(t *testing.T, wc WriterConfig, hc HomeConfig) {
	var dropped []uint64
	wc.OnTargetDropped = func(id uint64, err error) {
		dropped = append(dropped, id)
		assert.ErrorIs(t, err, rdma.ErrCompletion)
	}
	tp := newTopo(t, hc, wc)
	stay := tp.addRing(RingConfig{Slots: 64})
	r, err := NewRing(tp.dev, RingConfig{Slots: 64, CQ: tp.rcq})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	wq, _ := qpPair(t, tp.dev, tp.w.cq, tp.dev, tp.rcq)
	_, err = tp.w.AddTarget(Target{ID: 7, QP: wq, Ring: r.Desc()})
	require.NoError(t, err)
	require.Equal(t, 2, tp.w.Stats().Direct)
	require.Equal(t, wc.SoloHome != nil && membarrier.Available(), tp.w.Stats().Solo, "solo (the lean path) where membarrier(2) works")
	_, err = tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.NoError(t, wq.Close())
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, []uint64{7}, dropped)
	assert.Equal(t, 1, tp.w.Stats().Targets)
	var c collector
	pollUntil(t, stay.Reader(), &c, func() bool { return len(c.ticks) == 2 })
	assert.Equal(t, uint64(2), tp.w.Stats().Published)

	require.NoError(t, tp.w.homeQP.Close())
	_, err = tp.w.Publish(0, payloadFor(3, 8), 0)
	require.ErrorIs(t, err, ErrHomeFailed)
	_, err = tp.w.Publish(0, payloadFor(3, 8), 0)
	require.ErrorIs(t, err, ErrHomeFailed, "broken for good")
}

// A mapped target whose subscriber withdraws its ring (the region is
// deregistered; the writer's QP stays in RTS) is dropped at a publish
// after the withdrawal reaches the writer's QP, on the direct and the
// lean path: liveness answers from the provider's counter (direct.go),
// which the withdrawal moves, not from a cached yes.
func TestDirect_RingWithdrawn_TargetDropped(t *testing.T) {
	skipIfForcedGeneric(t)
	for _, p := range []struct {
		name string
		wc   WriterConfig
	}{{"direct", WriterConfig{}}, {"lean", WriterConfig{SoloHome: soloHere}}} {
		t.Run(p.name, func(t *testing.T) {
			var dropped atomic.Int32
			wc := p.wc
			wc.OnTargetDropped = func(uint64, error) { dropped.Add(1) }
			tp := newTopo(t, HomeConfig{JournalSlots: 64}, wc)
			stay := tp.addRing(RingConfig{Slots: 64})
			r, err := NewRing(tp.dev, RingConfig{Slots: 64, CQ: tp.rcq})
			require.NoError(t, err)
			wq, _ := qpPair(t, tp.dev, tp.w.cq, tp.dev, tp.rcq)
			_, err = tp.w.AddTarget(Target{ID: 7, QP: wq, Ring: r.Desc()})
			require.NoError(t, err)
			require.Equal(t, 2, tp.w.Stats().Direct)
			for i := 1; i <= 20; i++ { // past the first claims: a cached "live" for every ring
				_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
				require.NoError(t, err)
			}
			require.Zero(t, dropped.Load())
			require.NoError(t, r.Close())
			n := 20
			for deadline := time.Now().Add(10 * time.Second); dropped.Load() == 0; n++ {
				require.True(t, time.Now().Before(deadline), "the withdrawn ring was never dropped")
				_, err := tp.w.Publish(0, payloadFor(uint64(n+1), 8), 0)
				require.NoError(t, err)
				time.Sleep(100 * time.Microsecond)
			}
			assert.Equal(t, int32(1), dropped.Load())
			assert.Equal(t, 1, tp.w.Stats().Targets)
			var c collector
			pollUntil(t, stay.Reader(), &c, func() bool { return len(c.ticks) == n })
			assert.Empty(t, c.events, "the ring that stayed got every tick")
		})
	}
}
