package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func payloadFor(seqHint uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seqHint*7 + uint64(i))
	}
	return b
}

func TestRing_PublishPoll_DeliversEverySequenceInOrder(t *testing.T) {
	for _, mode := range []Mode{Lossy, Reliable} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{JournalSlots: 256}, WriterConfig{PublisherID: 9})
			r1 := tp.addRing(RingConfig{Slots: 256, Mode: mode})
			r2 := tp.addRing(RingConfig{Slots: 1024, Mode: mode})
			const n = 5000
			var c1, c2 collector
			for i := uint64(1); i <= n; i++ {
				seq, err := tp.w.Publish(uint16(i%5), payloadFor(i, int(i%97)), int64(i))
				require.NoError(t, err)
				require.Equal(t, i, seq)
				if i%100 == 0 { // keep a reliable ring from filling
					pollUntil(t, r1.Reader(), &c1, func() bool { return r1.Reader().Next() > i })
					pollUntil(t, r2.Reader(), &c2, func() bool { return r2.Reader().Next() > i })
				}
			}
			for _, c := range []*collector{&c1, &c2} {
				require.Len(t, c.ticks, n)
				assert.Empty(t, c.events)
				for i, tk := range c.ticks {
					s := uint64(i + 1)
					require.Equal(t, s, tk.Seq)
					assert.Equal(t, uint16(s%5), tk.Type)
					assert.Equal(t, uint32(9), tk.Publisher)
					assert.Equal(t, int64(s), tk.PublishNs)
					assert.Equal(t, payloadFor(s, int(s%97)), tk.Payload)
				}
			}
			st := r1.Reader().Stats()
			assert.Equal(t, ReaderStats{Next: n + 1, Delivered: n}, st)
			assert.Equal(t, uint64(n), tp.w.Stats().Published)
			assert.Equal(t, uint64(n+1), tp.home.Counter())
		})
	}
}

func TestRing_PublishBatch_ClaimsConsecutiveSequences(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{MaxBatch: 16})
	r := tp.addRing(RingConfig{Slots: 1024})
	batch := make([]Tick, 16)
	for i := range batch {
		batch[i] = Tick{Type: uint16(i), Flags: 0x0100 | FlagSkip, PublishNs: int64(i), Payload: payloadFor(uint64(i), 8)}
	}
	first, err := tp.w.PublishBatch(batch)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), first)
	first, err = tp.w.PublishBatch(batch[:3])
	require.NoError(t, err)
	assert.Equal(t, uint64(17), first)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 19 })
	for i, tk := range c.ticks {
		assert.Equal(t, uint64(i+1), tk.Seq)
		assert.Equal(t, uint16(0x0100), tk.Flags, "ring's own flag bits are stripped")
	}
	_, err = tp.w.PublishBatch(make([]Tick, 17))
	require.ErrorIs(t, err, ErrBatchTooLarge)
	first, err = tp.w.PublishBatch(nil)
	require.NoError(t, err)
	assert.Zero(t, first)
	assert.Equal(t, uint64(20), tp.home.Counter(), "refused and empty batches claim nothing")
}

func TestWriter_Publish_OversizePayloadChangesNothing(t *testing.T) {
	tp := newTopo(t, HomeConfig{SlotSize: 128}, WriterConfig{})
	r := tp.addRing(RingConfig{})
	_, err := tp.w.Publish(1, make([]byte, 128-SlotHeaderSize+1), 0)
	require.ErrorIs(t, err, ErrPayloadTooLarge)
	_, err = tp.w.PublishBatch([]Tick{{Payload: make([]byte, 4)}, {Payload: make([]byte, 1000)}})
	require.ErrorIs(t, err, ErrPayloadTooLarge)
	assert.Equal(t, uint64(1), tp.home.Counter())
	var c collector
	assert.Zero(t, r.Reader().Poll(&c))
	seq, err := tp.w.Publish(1, make([]byte, 128-SlotHeaderSize), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq)
}

func TestRing_Poll_DetectsOverrunAndAccountsExactly(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Lossy})
	const n = 1000
	for i := 1; i <= n; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 16), 0)
		require.NoError(t, err, "a lossy ring never blocks the writer")
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() == n+1 })
	var lost uint64
	next := uint64(1)
	ti, ei := 0, 0
	for next <= n { // ticks and events interleave in sequence order
		if ei < len(c.events) && c.events[ei].From == next {
			ev := c.events[ei]
			assert.Equal(t, EventOverrun, ev.Kind)
			lost += ev.Count()
			next = ev.To + 1
			ei++
			continue
		}
		require.Less(t, ti, len(c.ticks), "sequence %d neither delivered nor reported", next)
		require.Equal(t, next, c.ticks[ti].Seq)
		assert.Equal(t, payloadFor(next, 16), c.ticks[ti].Payload)
		ti++
		next++
	}
	assert.Equal(t, n-64, int(lost), "the last ring's worth is still there")
	assert.Len(t, c.ticks, 64)
	st := r.Reader().Stats()
	assert.Equal(t, uint64(n), st.Delivered+st.Overrun)
}

func TestRing_Reliable_PublisherWaitsThenFailsWithBackPressure(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 50 * time.Millisecond})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable})
	for i := 1; i <= 64; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	start := time.Now()
	seq, err := tp.w.Publish(0, payloadFor(65, 8), 0)
	require.ErrorIs(t, err, ErrBackPressure)
	assert.Zero(t, seq)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it waited for its timeout first")
	assert.Equal(t, uint64(65), tp.home.Counter(), "nothing was claimed")
	assert.Equal(t, uint64(1), tp.w.Stats().BackPressure)

	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 64 })
	// The reader's credit write lets the writer on.
	seq, err = tp.w.Publish(0, payloadFor(65, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(65), seq)
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 65 })
	assert.Empty(t, c.events, "nothing is lost in reliable mode")
	for i, tk := range c.ticks {
		assert.Equal(t, payloadFor(uint64(i+1), 8), tk.Payload)
	}
}

func TestWriter_PublishAt_SecondLineLoses(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{PublisherID: 1})
	b := tp.addWriter(WriterConfig{PublisherID: 2})
	r := tp.addRing(RingConfig{}, tp.w, b)
	for s := uint64(1); s <= 100; s++ {
		first, second := tp.w, b
		if s%2 == 0 {
			first, second = b, tp.w
		}
		got, err := first.PublishAt(s, 0, payloadFor(s, 8), 0)
		require.NoError(t, err)
		require.Equal(t, s, got)
		got, err = second.PublishAt(s, 0, payloadFor(s+1000, 8), 0)
		require.ErrorIs(t, err, ErrLost)
		require.Zero(t, got)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 100 })
	for i, tk := range c.ticks {
		s := uint64(i + 1)
		assert.Equal(t, s, tk.Seq)
		assert.Equal(t, payloadFor(s, 8), tk.Payload, "the winner's copy")
		assert.Equal(t, uint32(1+(s+1)%2), tk.Publisher)
	}
	assert.Equal(t, uint64(50), tp.w.Stats().Lost)
	assert.Equal(t, uint64(50), b.Stats().Lost)
	_, err := b.PublishAt(0, 0, nil, 0)
	require.ErrorIs(t, err, ErrInvalidSequence)
}

func TestWriter_PublishAt_AheadOfCounterSkipsTheMissing(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{ArbitrationWindow: 5 * time.Millisecond})
	r := tp.addRing(RingConfig{})
	seq, err := tp.w.PublishAt(5, 0, payloadFor(5, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), seq)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 1 })
	assert.Equal(t, []Event{{Kind: EventSkip, From: 1, To: 4}}, c.events)
	assert.Equal(t, uint64(5), c.ticks[0].Seq)
	assert.Equal(t, uint64(4), tp.w.Stats().Skipped)
	assert.Equal(t, uint64(4), r.Reader().Stats().Skip)
	_, err = tp.w.PublishAt(6+MaxSkip+1, 0, nil, 0)
	require.ErrorIs(t, err, ErrInvalidSequence)
}

// A claim that is never written (its publisher died between claim and
// write) becomes exactly one gap event once later ticks have waited for
// the gap timeout.
func TestReader_Poll_ReportsGapForClaimNeverWritten(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	dead := tp.addWriter(WriterConfig{PublisherID: 66})
	r := tp.addRing(RingConfig{GapTimeout: 30 * time.Millisecond}, tp.w, dead)
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	lost, err := dead.claim(1) // and then nothing: the process "died"
	require.NoError(t, err)
	require.Equal(t, uint64(2), lost)
	dead.cached = 0
	for i := 3; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	start := time.Now()
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 9 })
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.Equal(t, []Event{{Kind: EventGap, From: 2, To: 2}}, c.events)
	for i, tk := range c.ticks {
		want := uint64(i + 1)
		if i >= 1 {
			want++
		}
		assert.Equal(t, want, tk.Seq)
	}
	assert.Equal(t, uint64(1), r.Reader().Stats().Gap)
}

func TestReader_Poll_RecoversGapFromJournal(t *testing.T) {
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{})
	r := tp.addRing(RingConfig{GapTimeout: 20 * time.Millisecond})
	jq, _ := qpPair(t, tp.dev, tp.rcq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	// Sequence 1 reaches the journal but not the ring (the writer died
	// between the two).
	seq, err := tp.w.claim(1)
	require.NoError(t, err)
	tp.w.stage(0, seq, 3, 0, payloadFor(1, 20), 11)
	require.True(t, tp.w.writeSlot(tp.w.journal, 0))
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.NoError(t, err)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 2 })
	assert.Empty(t, c.events)
	assert.Equal(t, uint64(1), c.ticks[0].Seq)
	assert.Equal(t, payloadFor(1, 20), c.ticks[0].Payload)
	assert.Equal(t, uint16(3), c.ticks[0].Type)
	assert.Equal(t, uint64(1), r.Reader().Stats().Recovered)
}

func TestReader_Poll_RecoversOverrunFromJournal(t *testing.T) {
	tp := newTopo(t, HomeConfig{JournalSlots: 256}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64})
	jq, _ := qpPair(t, tp.dev, tp.rcq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	const n = 1000
	for i := 1; i <= n; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 16), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() == n+1 })
	require.Equal(t, []Event{{Kind: EventOverrun, From: 1, To: n - 256}}, c.events)
	require.Len(t, c.ticks, 256)
	for i, tk := range c.ticks {
		require.Equal(t, uint64(n-256+1+i), tk.Seq)
		require.Equal(t, payloadFor(tk.Seq, 16), tk.Payload)
	}
	assert.Equal(t, uint64(256-64), r.Reader().Stats().Recovered)
}

// A slot whose stamp is right but whose header is garbage is reported as
// corrupt, never delivered, and the reader goes on.
func TestReader_Poll_ReportsCorruptSlot(t *testing.T) {
	tp := newTopo(t, HomeConfig{SlotSize: 64}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, SlotSize: 64})
	rd := r.Reader()
	slot := rd.slots[64:128] // a buggy writer: seq 1 (slot 1) with len past the slot
	binary.LittleEndian.PutUint32(slot[16:], 1000)
	stampAt(rd.slots, 64).Store(1)
	_, err := tp.w.claim(1)
	require.NoError(t, err)
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.NoError(t, err)
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 1 })
	assert.Equal(t, []Event{{Kind: EventCorrupt, From: 1, To: 1}}, c.events)
	assert.Equal(t, uint64(2), c.ticks[0].Seq)
	assert.Equal(t, uint64(1), rd.Stats().Corrupt)
}

func TestWriter_TargetWithFailedQP_IsDroppedAndPublishingGoesOn(t *testing.T) {
	var dropped []uint64
	var dropErr error
	tp := newTopo(t, HomeConfig{}, WriterConfig{SignalEvery: 1, OnTargetDropped: func(id uint64, err error) {
		dropped = append(dropped, id)
		dropErr = err
	}})
	gone := tp.addRing(RingConfig{})
	stay := tp.addRing(RingConfig{})
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.NoError(t, gone.Close()) // deregisters: writes now fail at the target
	for i := 2; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	assert.Equal(t, []uint64{0}, dropped)
	require.ErrorIs(t, dropErr, rdma.ErrCompletion)
	assert.Equal(t, uint64(1), tp.w.Stats().Dropped)
	assert.Equal(t, 1, tp.w.Stats().Targets)
	var c collector
	pollUntil(t, stay.Reader(), &c, func() bool { return len(c.ticks) == 10 })
	assert.Empty(t, c.events)
}

func TestWriter_AddRemoveTarget_WhilePublishing(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{})
	errc := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(errc)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0); err != nil {
				errc <- err
				return
			}
			if i%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	late, err := NewRing(tp.dev, RingConfig{Slots: 1 << 16, Start: 1})
	require.NoError(t, err)
	defer late.Close()
	wq, _ := qpPair(t, tp.dev, tp.wcq, tp.dev, tp.rcq)
	_, err = tp.w.AddTarget(Target{ID: 77, QP: wq, Ring: late.Desc()})
	require.NoError(t, err)
	_, err = tp.w.AddTarget(Target{ID: 77, QP: wq, Ring: late.Desc()})
	require.ErrorIs(t, err, ErrTargetExists)
	lr := late.Reader()
	stamped := func() int {
		n := 0
		for s := uint64(0); s <= lr.mask; s++ {
			if stampAt(lr.slots, int(s)*lr.slotSize).Load() != 0 {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return stamped() > 0 }, 10*time.Second, time.Millisecond,
		"the late ring gets ticks while it is a target")
	require.NoError(t, tp.w.RemoveTarget(77))
	require.ErrorIs(t, tp.w.RemoveTarget(77), ErrNoTarget)
	close(stop)
	for err := range errc {
		require.NoError(t, err)
	}
	n := tp.home.Counter()
	h := &nopHandler{}
	pollUntil(t, r.Reader(), h, func() bool { return r.Reader().Next() == n })
	st := r.Reader().Stats()
	assert.Equal(t, n-1, st.Delivered+st.Overrun, "the first ring accounts for every tick")
	assert.Zero(t, st.Gap+st.Corrupt)
}

func TestConfigs_RejectBadValuesNamingThem(t *testing.T) {
	dev := openDev(t)
	for _, rc := range []RingConfig{{Slots: 3}, {SlotSize: 100}, {Mode: 9}, {MaxBatch: -1}, {Slots: -4}, {MaxBatch: 1 << 16, SlotSize: 4096}} {
		_, err := NewRing(dev, rc)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", rc)
	}
	_, err := NewHome(dev, HomeConfig{JournalSlots: 5})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "JournalSlots 5")
	_, err = NewWriter(WriterConfig{})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = ParseMode("sometimes")
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = ParseClaimMode("xadd")
	require.ErrorIs(t, err, ErrInvalidConfig)
	m, err := ParseMode("reliable")
	require.NoError(t, err)
	assert.Equal(t, Reliable, m)
}

func TestReader_ReadInto_CopiesAndReportsShortBuffer(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{})
	_, err := tp.w.Publish(4, payloadFor(1, 40), 99)
	require.NoError(t, err)
	var tk Tick
	ok, ev, err := r.Reader().ReadInto(&tk, make([]byte, 10))
	require.ErrorIs(t, err, ErrShortBuffer)
	assert.False(t, ok)
	assert.Zero(t, ev)
	buf := make([]byte, 64)
	ok, _, err = r.Reader().ReadInto(&tk, buf)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(1), tk.Seq)
	assert.Equal(t, payloadFor(1, 40), tk.Payload)
	assert.Equal(t, int64(99), tk.PublishNs)
	ok, ev, err = r.Reader().ReadInto(&tk, buf)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Zero(t, ev)
	assert.Equal(t, ReaderStats{Next: 2, Delivered: 1}, r.Reader().Stats())
}

var _ = errors.Is
var _ = fmt.Sprint

func TestWriterReader_Close_StopsAndIsIdempotent(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{})
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	var c collector
	assert.Zero(t, r.Reader().Poll(&c), "a closed reader delivers nothing")
	_, _, err = r.Reader().ReadInto(&Tick{}, make([]byte, 64))
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, tp.w.Close())
	require.NoError(t, tp.w.Close())
	_, err = tp.w.Publish(0, nil, 0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = tp.w.AddTarget(Target{ID: 5, QP: tp.w.homeQP, Ring: r.Desc()})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, tp.home.Close())
	require.NoError(t, tp.home.Close())
}

func TestWriter_HomeQPFailure_IsStickyErrHomeFailed(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	tp.addRing(RingConfig{})
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.NoError(t, tp.home.Close()) // the counter's region is gone
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.ErrorIs(t, err, ErrHomeFailed)
	_, err = tp.w.Publish(0, payloadFor(3, 8), 0)
	require.ErrorIs(t, err, ErrHomeFailed, "sticky: the writer cannot claim any more")
}

func TestWriter_AddTarget_RefusesRingWithSmallerSlots(t *testing.T) {
	tp := newTopo(t, HomeConfig{SlotSize: 256}, WriterConfig{})
	small, err := NewRing(tp.dev, RingConfig{SlotSize: 128})
	require.NoError(t, err)
	defer small.Close()
	wq, _ := qpPair(t, tp.dev, tp.wcq, tp.dev, tp.rcq)
	_, err = tp.w.AddTarget(Target{ID: 1, QP: wq, Ring: small.Desc()})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "96 bytes of payload")
	assert.Equal(t, 0, tp.w.Stats().Targets)
	bad := small.Desc()
	bad.Slots = 3
	_, err = tp.w.AddTarget(Target{ID: 2, QP: wq, Ring: bad})
	require.ErrorIs(t, err, ErrMalformed)
}

// Batches whose runs wrap around the ring and the staging area arrive
// whole and in order, in both modes.
func TestRing_PublishBatch_RunsWrapRingAndStaging(t *testing.T) {
	for _, mode := range []Mode{Lossy, Reliable} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{MaxBatch: 10, StagingSlots: 24})
			r := tp.addRing(RingConfig{Slots: 64, Mode: mode})
			batch := make([]Tick, 10)
			var c collector
			seq := uint64(1)
			for round := 0; round < 300; round++ {
				k := 1 + round%10
				for i := 0; i < k; i++ {
					batch[i] = Tick{Type: uint16(i), Payload: payloadFor(seq+uint64(i), int(seq+uint64(i))%90)}
				}
				first, err := tp.w.PublishBatch(batch[:k])
				require.NoError(t, err)
				require.Equal(t, seq, first)
				seq += uint64(k)
				pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() == seq })
			}
			require.Empty(t, c.events)
			require.Len(t, c.ticks, int(seq-1))
			for i, tk := range c.ticks {
				s := uint64(i + 1)
				require.Equal(t, s, tk.Seq)
				require.Equal(t, payloadFor(s, int(s)%90), tk.Payload)
			}
		})
	}
}

// With the home reachable, a claim that died on the last tick of a burst
// (nothing after it in the ring) is still reported, from the counter.
func TestReader_Poll_ReportsTrailingDeadClaimFromCounter(t *testing.T) {
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{})
	r := tp.addRing(RingConfig{GapTimeout: 20 * time.Millisecond})
	jq, _ := qpPair(t, tp.dev, tp.rcq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	_, err = tp.w.claim(2) // sequences 2 and 3, never written
	require.NoError(t, err)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.events) == 1 })
	assert.Equal(t, []Event{{Kind: EventGap, From: 2, To: 3}}, c.events)
	assert.Len(t, c.ticks, 1)
	assert.Equal(t, uint64(4), r.Reader().Next())
}

// A reliable subscriber that never attached its credit cell still gets
// flow control: the writer READs the ring's head when it looks full (on
// shm a load of the mapped head word), on every path.
func TestRing_Reliable_WithoutCreditCell_WriterReadsHead(t *testing.T) {
	for _, p := range writerPaths {
		t.Run(p.name, func(t *testing.T) { testWriterReadsHead(t, p.wc) })
	}
}

func testWriterReadsHead(t *testing.T, wc WriterConfig) {
	wc.Timeout = 50 * time.Millisecond
	tp := newTopo(t, HomeConfig{}, wc)
	r, err := NewRing(tp.dev, RingConfig{Slots: 64, Mode: Reliable})
	require.NoError(t, err)
	defer r.Close()
	wq, _ := qpPair(t, tp.dev, tp.wcq, tp.dev, tp.rcq)
	_, err = tp.w.AddTarget(Target{ID: 1, QP: wq, Ring: r.Desc()})
	require.NoError(t, err)
	assert.Equal(t, !wc.Generic && !forceGeneric, tp.w.targets.Load().all[0].dhead != nil, "the head word is mapped on the direct path")
	var c collector
	for i := uint64(1); i <= 64; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	_, err = tp.w.Publish(0, payloadFor(65, 8), 0)
	require.ErrorIs(t, err, ErrBackPressure, "full, and the head says so")
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 64 })
	for i := uint64(65); i <= 300; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
		pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() > i })
	}
	assert.Empty(t, c.events)
	for i, tk := range c.ticks {
		require.Equal(t, payloadFor(uint64(i+1), 8), tk.Payload)
	}
}

// Credits go out every slots/16 sequences while the reader is busy, and
// whatever is left once it goes idle, gap detection on or off.
func TestReader_Credits_BatchedThenFlushedWhenIdle(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	for i := uint64(1); i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	cell := tp.w.targets.Load().all[0].cell
	require.Equal(t, uint64(1), cell.Next.Load(), "the cell starts at the ring's start")
	rd := r.Reader()
	var c collector
	rd.Poll(&c)
	require.Len(t, c.ticks, 10)
	assert.Equal(t, uint64(11), cell.Next.Load(), "10 >= slots/16: a credit WRITE")
	for i := uint64(11); i <= 13; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	rd.Poll(&c)
	require.Len(t, c.ticks, 13)
	assert.Equal(t, uint64(11), cell.Next.Load(), "3 < slots/16: no credit WRITE yet")
	for i := 0; i < 64; i++ {
		rd.Poll(&c) // idle
	}
	assert.Equal(t, uint64(14), cell.Next.Load(), "flushed when idle")
}

// With a CQ per target QP (as the product's link.Open makes them) a claim
// polls only the home's CQ; the targets' CQs are drained as their signalled
// WRITEs pile up, so a failed target is still found and dropped within a
// bounded number of publishes, and the others get every tick.
func TestWriter_TargetWithOwnCQ_FailedIsDroppedWithinBoundedPublishes(t *testing.T) {
	var dropped []uint64
	tp := newTopo(t, HomeConfig{}, WriterConfig{OnTargetDropped: func(id uint64, err error) { dropped = append(dropped, id) }})
	own := func(id uint64) *Ring {
		r, err := NewRing(tp.dev, RingConfig{Slots: 1024, CQ: tp.rcq})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		cq := newCQ(t, tp.dev, 8192)
		wq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.rcq)
		_, err = tp.w.AddTarget(Target{ID: id, QP: wq, CQ: cq, Ring: r.Desc()})
		require.NoError(t, err)
		return r
	}
	gone, stay := own(7), own(8)
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.NoError(t, gone.Close()) // deregisters: writes now fail at the target
	const n = 300                    // more than a send queue (256) of WRITEs
	for i := 2; i <= n; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	assert.Equal(t, []uint64{7}, dropped)
	assert.Equal(t, 1, tp.w.Stats().Targets)
	var c collector
	pollUntil(t, stay.Reader(), &c, func() bool { return len(c.ticks) == n })
	assert.Empty(t, c.events)
	for i, tk := range c.ticks {
		require.Equal(t, uint64(i+1), tk.Seq)
	}
}

// A writer that dropped a reliable ring and added it again hands out a new
// credit cell: the reader's AddCredit for the same publisher replaces the
// old cell (it failed with ErrTargetExists before, so the reader kept
// writing its position where the writer no longer looked).
func TestReader_AddCredit_SamePublisherAgain_ReplacesTheCell(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	rd := r.Reader()
	require.NoError(t, tp.w.RemoveTarget(0))
	// Take the freed cell first, so the ring's new target gets another one.
	other := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	otherCell := tp.w.targets.Load().all[0].cell
	wq, rq := qpPair(t, tp.dev, tp.wcq, tp.dev, tp.rcq)
	cd, err := tp.w.AddTarget(Target{ID: 9, QP: wq, Ring: r.Desc()})
	require.NoError(t, err)
	require.NoError(t, rd.AddCredit(rq, cd), "a new cell of the same publisher replaces the old one")
	require.Len(t, *rd.credits.Load(), 1)
	var cell *creditCell
	for _, tg := range tp.w.targets.Load().all {
		if tg.id == 9 {
			cell = tg.cell
		}
	}
	require.NotNil(t, cell)
	for i := uint64(1); i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	var c, oc collector
	rd.Poll(&c)
	other.Reader().Poll(&oc)
	require.Len(t, c.ticks, 10)
	assert.Equal(t, uint64(11), cell.Next.Load(), "the position goes to the new cell")
	assert.Equal(t, uint64(11), otherCell.Next.Load(), "the other ring's cell holds its own reader's position")
	for i := 0; i < 64; i++ {
		rd.Poll(&c)
		other.Reader().Poll(&oc)
	}
	assert.Equal(t, uint64(11), cell.Next.Load())
}

// failingQP is a queue pair whose posts all fail, counting them (a journal
// whose home went away).
type failingQP struct {
	rdma.QueuePair
	posts int
}

func (q *failingQP) PostSend(*rdma.WorkRequest) error {
	q.posts++
	return rdma.ErrCompletion
}

// A journal whose READs fail is given up after the first: the rest of the
// range is reported at once, not fetched sequence by sequence (each fetch
// of a home that went away can cost the journal's timeout; a chaos run's
// subscriber sat in one Poll for 30 s). DropJournal detaches it too.
func TestReader_JournalFailing_GivenUpAfterOneFetch(t *testing.T) {
	tp := newTopo(t, HomeConfig{JournalSlots: 256}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64})
	jq, _ := qpPair(t, tp.dev, tp.rcq, tp.dev, tp.homeQ)
	fq := &failingQP{QueuePair: jq}
	require.NoError(t, r.Reader().SetJournal(tp.dev, fq, tp.home.Desc(), time.Second))
	const n = 1000
	for i := 1; i <= n; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 16), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return r.Reader().Next() == n+1 })
	require.Equal(t, []Event{{Kind: EventOverrun, From: 1, To: n - 64}}, c.events)
	require.Len(t, c.ticks, 64)
	assert.Equal(t, 1, fq.posts, "one failed fetch, then no more")
	assert.Zero(t, r.Reader().Stats().Recovered)

	r.Reader().DropJournal()
	r.Reader().Poll(&c)
	assert.Nil(t, r.Reader().journal, "dropped at the next poll")
}
