package ring

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func TestReader_FarAheadForgedStamp_NotTrustedAndDeliveryGoesOn(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 20 * time.Millisecond})
	rd := r.Reader()
	for i := 1; i <= 5; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 5 })
	// one stray 8-byte WRITE into the slot of seq 6: a stamp a huge number
	// of laps ahead (today's reader jumped to it and reported ~1.8e19 overruns)
	forged := uint64(6) + 64*(1<<50)
	stampAt(rd.slots, int(6&rd.mask)*rd.slotSize).Store(forged)
	for range 1000 {
		rd.Poll(&c)
	}
	assert.Equal(t, uint64(6), rd.Next(), "a stamp whose header check fails is never acted on")
	assert.Empty(t, c.events)
	assert.NotZero(t, rd.Stats().Untrusted)
	for i := 6; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 10 })
	assert.Empty(t, c.events)
	for i, tk := range c.ticks {
		assert.Equal(t, uint64(i+1), tk.Seq)
	}
}

func TestReader_LappedStampAboveBound_NotTrusted(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 20 * time.Millisecond})
	rd := r.Reader()
	rd.SetEpoch(1, 100) // nothing at or above 100 was handed out
	var c collector
	// a complete slot for 641 (header check passes), written by hand exactly
	// as a writer would, but above the bound
	seq := uint64(641)
	off := int(seq&rd.mask) * rd.slotSize
	putBody(rd.slots[off+offBody:off+SlotHeaderSize], seq, 0, 0, 0, 0, 7, nil)
	stampAt(rd.slots, off).Store(seq)
	// seq 1 lives in the same slot as 641 (64 slots): the reader waits for 1
	for range 1000 {
		rd.Poll(&c)
	}
	assert.Equal(t, uint64(1), rd.Next())
	assert.Empty(t, c.events)
	rd.SetEpoch(1, 1000) // now the bound allows it: a real lap
	pollUntil(t, rd, &c, func() bool { return rd.Next() > 1 })
	require.NotEmpty(t, c.events)
	assert.Equal(t, EventOverrun, c.events[0].Kind)
}

func TestReader_NewEpoch_UnusedRangeIsOneEpochEvent(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1024, GapTimeout: 20 * time.Millisecond})
	rd := r.Reader()
	for i := 1; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 10 })
	// the home fails over: the old one had reserved up to 1<<22; the new
	// epoch starts there (a second home, a second writer)
	const start = 1 << 22
	w2 := tp.newEpoch(t, start, r)
	rd.SetEpoch(start, start+1<<22)
	for i := 0; i < 5; i++ {
		_, err := w2.Publish(0, payloadFor(uint64(start+i), 8), 0)
		require.NoError(t, err)
	}
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 15 })
	assert.Equal(t, []Event{{Kind: EventEpoch, From: 11, To: start - 1}}, c.events, "one event, not one gap per sequence")
	assert.Equal(t, uint64(start), c.ticks[10].Seq)
	st := rd.Stats()
	assert.Equal(t, uint64(start-11), st.Epoch)
	assert.Equal(t, st.Next-1, st.Delivered+st.Gap+st.Overrun+st.Corrupt+st.Skip+st.Epoch, "every sequence accounted for")
}

func TestReader_HoleLargerThan256_ReportedAsGap(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	dead := tp.addWriter(WriterConfig{PublisherID: 66})
	r := tp.addRing(RingConfig{Slots: 4096, GapTimeout: 20 * time.Millisecond}, tp.w)
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	_, err = dead.claim(1000) // a reconnect's hole: claimed, never written here
	require.NoError(t, err)
	tp.w.cached = 1002
	_, err = tp.w.Publish(0, payloadFor(1002, 8), 0)
	require.NoError(t, err)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 2 })
	assert.Equal(t, []Event{{Kind: EventGap, From: 2, To: 1001}}, c.events)
}

func TestWriter_SetLimit_ClaimsReachingItAreFenced(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 20 * time.Millisecond})
	tp.w.SetLimit(4) // sequences 1..3 reserved
	for i := 1; i <= 3; i++ {
		seq, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
		assert.Equal(t, uint64(i), seq)
	}
	_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishBatch([]Tick{{Payload: payloadFor(4, 8)}})
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishAt(9, 0, payloadFor(9, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	assert.Equal(t, uint64(4), tp.home.Counter(), "a CAS claim fenced before it claims takes nothing")
	tp.w.SetLimit(0)
	_, err = tp.w.Publish(0, payloadFor(4, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 3 })

	faa := tp.addWriter(WriterConfig{Claim: ClaimFAA, PublisherID: 9})
	faa.SetLimit(5)
	seq, err := faa.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), seq)
	_, err = faa.Publish(0, payloadFor(5, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a FAA claim past the limit is not written")
}

func TestReader_NewEpochTicksAlreadyInNextSlot_OneEpochEventAtOnce(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: time.Hour}) // no timeout can help: the slots tell
	rd := r.Reader()
	for i := 1; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 10 })
	// the new epoch starts one ring-multiple above: its ticks land exactly
	// in the slots the reader waits on, faster than any gap timeout
	const start = 64*1000 + 1
	w2 := tp.newEpoch(t, start, r)
	rd.SetEpoch(start, start+1<<20)
	for i := 0; i < 20; i++ {
		_, err := w2.Publish(0, payloadFor(uint64(start+i), 8), 0)
		require.NoError(t, err)
	}
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 30 })
	assert.Equal(t, []Event{{Kind: EventEpoch, From: 11, To: start - 1}}, c.events)
}

func TestReader_InterleavedHolesOfALateJoin_OneGapTimeoutNotOnePerHole(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	other := tp.addWriter(WriterConfig{PublisherID: 77}) // claims, but never writes into this ring
	const timeout = 200 * time.Millisecond
	r := tp.addRing(RingConfig{Slots: 1024, GapTimeout: timeout}, tp.w)
	// the two publishers interleave; only tp.w writes here: 50 holes
	for i := 0; i < 50; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(2*i+1), 8), 0)
		require.NoError(t, err)
		other.cached = tp.w.cached
		_, err = other.claim(1)
		require.NoError(t, err)
		tp.w.cached = other.cached
	}
	_, err := tp.w.Publish(0, payloadFor(101, 8), 0)
	require.NoError(t, err)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 51 })
	require.Len(t, c.events, 50)
	for i, ev := range c.events {
		assert.Equal(t, Event{Kind: EventGap, From: uint64(2*i + 2), To: uint64(2*i + 2)}, ev)
	}
	assert.Equal(t, uint64(1), r.Reader().gapFires, "one gap timeout for all the holes, not one per hole")
}

func TestFenceCounter_LaterClaimsAreFencedOnEveryWriter(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	faa := tp.addWriter(WriterConfig{Claim: ClaimFAA, PublisherID: 5})
	tp.w.SetLimit(1 << 22)
	faa.SetLimit(1 << 22)
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	cq := newCQ(t, tp.dev, 64)
	fq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	before, err := FenceCounter(tp.dev, fq, cq, tp.home.Desc(), time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), before)
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a CAS claim learns the fenced counter and writes nothing")
	_, err = faa.Publish(0, payloadFor(2, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a FAA claim gets a fenced value and writes nothing")
}

// A CAS claim that loses to a fence (FenceCounter) learns a counter far
// above its limit: it returns ErrFenced at once, not ErrBackPressure after
// the timeout while it waits for room for a sequence it may never write.
// (Before, a reliable publisher whose home was fenced under it, or that
// was moved to a home lost meanwhile, reported "no room" while its
// subscriber kept up, and did not fail over.)
func TestFenceCounter_ReliableWriter_ErrFencedNotNoRoom(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 50 * time.Millisecond})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	defer r.Close()
	tp.w.SetLimit(1 << 22)
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 1 })
	cq := newCQ(t, tp.dev, 64)
	fq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	_, err = FenceCounter(tp.dev, fq, cq, tp.home.Desc(), time.Second)
	require.NoError(t, err)
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "the subscriber has room for 2; the fenced counter's value is no sequence to wait for")
	_, err = tp.w.PublishBatch([]Tick{{Payload: payloadFor(2, 8)}})
	require.ErrorIs(t, err, ErrFenced)
	st := tp.w.Stats()
	assert.Zero(t, st.BackPressure)
	assert.Equal(t, uint64(1), st.Published)
}

func TestReader_FencedCounter_NeverReadAsClaims(t *testing.T) {
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{})
	r := tp.addRing(RingConfig{GapTimeout: 20 * time.Millisecond})
	jq, _ := qpPair(t, tp.dev, r.reader.cq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 3 })
	cq := newCQ(t, tp.dev, 64)
	fq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	_, err := FenceCounter(tp.dev, fq, cq, tp.home.Desc(), time.Second)
	require.NoError(t, err)
	deadline := time.Now().Add(300 * time.Millisecond) // many gap timeouts
	for time.Now().Before(deadline) {
		r.Reader().Poll(&c)
	}
	assert.Empty(t, c.events, "a fenced counter is not 2^62 claimed sequences")
}

// A fenced writer whose reliable subscriber has no room (it sits on the
// ended epoch's range, or is stalled) gets ErrFenced at once, not
// ErrBackPressure after the timeout: only ErrFenced makes it fail over, so
// waiting for room first left every publisher of the chaos test waiting on
// a full ring, and no home was elected for as long as that lasted.
func TestWriter_FencedWithFullReliableRing_ErrFencedNotBackPressure(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 30 * time.Millisecond})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	defer r.Close()
	for i := uint64(1); i <= 64; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	_, err := tp.w.Publish(0, payloadFor(65, 8), 0)
	require.ErrorIs(t, err, ErrBackPressure, "full and not fenced: back pressure")
	tp.w.SetLimit(0)
	_, err = tp.w.Publish(0, payloadFor(65, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishBatch([]Tick{{Payload: payloadFor(65, 8)}})
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishAt(65, 0, payloadFor(65, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	assert.Equal(t, uint64(65), tp.home.Counter(), "nothing claimed")
}

// A reliable ring whose reader sits a whole ring behind the counter (the
// sequences between were claimed while the ring was nobody's target) gets
// nothing from anyone, so it cannot detect the hole, and without help every
// writer waits on it for good. After two publishes in a row without room at
// the same position the writer writes one skip slot for the hole: the
// reader reports it as one EventSkip and the next publish goes through.
func TestWriter_ReliableReaderARingBehind_HoleSkippedNotStuck(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 20 * time.Millisecond})
	r := tp.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: 10 * time.Millisecond})
	rd := r.Reader()
	// Claimed elsewhere, never written here: 1..200.
	first, err := tp.w.claim(200)
	require.NoError(t, err)
	require.Equal(t, uint64(1), first)
	var c collector
	for i := range 2 {
		_, err = tp.w.Publish(0, payloadFor(201, 8), 0)
		require.ErrorIs(t, err, ErrBackPressure)
		for range 200 {
			rd.Poll(&c) // nothing to go on; after the second, the skip
		}
		if i == 0 {
			require.Empty(t, c.events, "one publish without room is not enough")
		}
	}
	require.Equal(t, []Event{{Kind: EventSkip, From: 1, To: 200}}, c.events)
	seq, err := tp.w.Publish(0, payloadFor(201, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(201), seq)
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 1 })
	assert.Equal(t, uint64(201), c.ticks[0].Seq)

	// A reader that is merely behind (its slot written) is never skipped.
	tp2 := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 20 * time.Millisecond})
	r2 := tp2.addRing(RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1})
	for i := uint64(1); i <= 64; i++ {
		_, err := tp2.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	for range 3 {
		_, err = tp2.w.Publish(0, payloadFor(65, 8), 0)
		require.ErrorIs(t, err, ErrBackPressure)
	}
	var c2 collector
	pollUntil(t, r2.Reader(), &c2, func() bool { return len(c2.ticks) == 64 })
	assert.Empty(t, c2.events)
}

// A home that stalled past its lease and wakes up must not write what it
// claims from its own counter before its lease loop has fenced it (the
// chaos test saw a SIGCONTed home's batches overwrite a newer epoch's
// ticks in a reliable ring): a claim after the lease end is refused with
// ErrFenced, whatever the limit says, before it shows on the counter, so
// readers name no gap for sequences that never carried a tick (the
// publisher retries the tick in the next epoch; the CLI's NATS-outage test
// saw gaps of 2-6 before the epoch under load, every tick received).
func TestWriter_SetLeaseEnd_ClaimsAfterItAreNotWritten(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 5 * time.Millisecond})
	tp.w.SetLeaseEnd(time.Now().Add(time.Hour))
	seq, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err, "within the lease")
	require.Equal(t, uint64(1), seq)

	tp.w.SetLeaseEnd(time.Now().Add(-time.Millisecond))
	_, err = tp.w.Publish(0, payloadFor(2, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishBatch([]Tick{{Payload: payloadFor(3, 8)}, {Payload: payloadFor(4, 8)}})
	require.ErrorIs(t, err, ErrFenced)
	_, err = tp.w.PublishAt(tp.home.Counter(), 0, payloadFor(5, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a PublishAt after the lease end writes nothing")
	assert.Equal(t, uint64(2), tp.home.Counter(), "refused before the claim showed")

	faa := tp.addWriter(WriterConfig{Claim: ClaimFAA, PublisherID: 9})
	faa.SetLeaseEnd(time.Now().Add(-time.Millisecond))
	_, err = faa.Publish(0, payloadFor(6, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a FAA claim after the lease end is not written")
	assert.Equal(t, uint64(2), tp.home.Counter(), "a FAA claim is refused before it shows too")

	tp.w.SetLeaseEnd(time.Time{}) // no bound
	seq, err = tp.w.Publish(0, payloadFor(7, 8), 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), seq)
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 2 })
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		r.Reader().Poll(&c)
	}
	assert.Equal(t, []uint64{1, 2}, []uint64{c.ticks[0].Seq, c.ticks[1].Seq}, "nothing claimed after the lease end was written")
	assert.Empty(t, c.events, "nothing claimed, nothing named")
}

// A claim the lease ended under (won before the end, checked after it: a
// home that answered late, a stall between the check and the atomic) is
// not written; on the direct path it goes back to the counter, so no
// reader takes it for claimed. Off it (a home QP's round trip) it stays,
// and readers name it a gap.
func TestWriter_ClaimTheLeaseEndedUnder_GoesBackOnTheDirectPath(t *testing.T) {
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			tp := newTopo(t, HomeConfig{}, WriterConfig{Generic: generic})
			r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 5 * time.Millisecond})
			_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
			require.NoError(t, err)
			first, err := tp.w.claim(2)
			require.NoError(t, err)
			require.Equal(t, uint64(2), first)
			tp.w.SetLeaseEnd(time.Now().Add(-time.Millisecond))
			_, err = tp.w.fenced(first, 2)
			require.ErrorIs(t, err, ErrFenced)
			tp.w.SetLeaseEnd(time.Time{})
			seq, err := tp.w.Publish(0, payloadFor(2, 8), 0)
			require.NoError(t, err)
			var c collector
			if tp.w.dctr != nil {
				assert.Equal(t, uint64(2), seq, "the refused claim went back")
				pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 2 })
				for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
					r.Reader().Poll(&c)
				}
				assert.Empty(t, c.events)
				return
			}
			assert.Equal(t, uint64(4), seq, "off the direct path the claim stays")
			pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 2 && len(c.events) > 0 })
			assert.Equal(t, Event{Kind: EventGap, From: 2, To: 3}, c.events[0], "and is named")
		})
	}
}

// silentQP is a home QP whose atomics never complete: a stopped or
// partitioned home.
type silentQP struct{ rdma.QueuePair }

func (q silentQP) PostSend(wr *rdma.WorkRequest) error {
	if wr.Op == rdma.OpCompareAndSwap || wr.Op == rdma.OpFetchAndAdd {
		return nil
	}
	return q.QueuePair.PostSend(wr)
}

// A claim waiting on a home that does not answer returns ErrFenced as soon
// as the writer is fenced (the lease went: SetLimit(0)), not at the
// writer's timeout: a publisher of a stopped home fails over when the
// home's lease expires, not a timeout later.
func TestWriter_ClaimWaitingOnASilentHome_FencedEndsTheWait(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	for _, claim := range []ClaimMode{ClaimCAS, ClaimFAA} {
		cq := newCQ(t, tp.dev, 64)
		hq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
		w, err := NewWriter(WriterConfig{Device: tp.dev, CQ: cq, HomeQP: silentQP{hq}, Home: tp.home.Desc(), Claim: claim, Timeout: time.Minute})
		require.NoError(t, err)
		defer w.Close()
		done := make(chan error, 1)
		go func() {
			_, err := w.Publish(0, payloadFor(1, 8), 0)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("%v: the claim returned (%v) though the home never answers", claim, err)
		case <-time.After(50 * time.Millisecond):
		}
		w.SetLimit(0)
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrFenced, "%v", claim)
		case <-time.After(30 * time.Second): // the writer's timeout is a minute
			t.Fatalf("%v: still waiting for the silent home after it was fenced", claim)
		}
	}
}

// A reader that knows no epoch yet (its node's home records came late)
// must not take a newer epoch's ticks for a lap: with AwaitEpoch it waits
// where it would jump, and once SetEpoch tells it where the new epoch
// starts it names the ended epoch's unused range with one EventEpoch, not
// as an overrun.
func TestReader_AwaitEpoch_NewEpochBeforeItsRecordIsNotAnOverrun(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: time.Hour})
	rd := r.Reader()
	rd.AwaitEpoch()
	for i := uint64(1); i <= 5; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 5 })
	// the old epoch reserved 6..999 and used none of it; the new one
	// starts at 1000 and laps the ring before the reader hears of it
	_, err := tp.w.claim(994)
	require.NoError(t, err)
	for i := uint64(1000); i < 1100; i++ {
		seq, err := tp.w.Publish(0, payloadFor(i, 8), 0)
		require.NoError(t, err)
		require.Equal(t, i, seq)
	}
	for range 1000 {
		rd.Poll(&c)
	}
	assert.Empty(t, c.events, "nothing is named before the reader knows the epochs")
	assert.Equal(t, uint64(6), rd.Next())
	rd.SetEpoch(1000, 1<<20)
	pollUntil(t, rd, &c, func() bool { return rd.Next() >= 1100 })
	require.NotEmpty(t, c.events)
	assert.Equal(t, Event{Kind: EventEpoch, From: 6, To: 999}, c.events[0], "the unused range is one epoch event")
	for _, e := range c.events[1:] {
		assert.Equal(t, EventOverrun, e.Kind, "%v", e)
		assert.GreaterOrEqual(t, e.From, uint64(1000), "only the new epoch's lapped ticks are overruns: %v", e)
	}
}

// newEpoch is the home failing over: a second home, its counter at start,
// and a writer on it connected to r.
func (tp *topo) newEpoch(t *testing.T, start uint64, r *Ring) *Writer {
	t.Helper()
	home2, err := NewHome(tp.dev, HomeConfig{Start: start})
	require.NoError(t, err)
	t.Cleanup(func() { _ = home2.Close() })
	cq := newCQ(t, tp.dev, 4096)
	hq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	w2, err := NewWriter(WriterConfig{Device: tp.dev, CQ: cq, HomeQP: hq, Home: home2.Desc(), Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w2.Close() })
	tp.connect(w2, 99, r)
	return w2
}

// A newer epoch's tick written into a ring whose reader has no home record
// for that epoch yet is not delivered (the reader cannot place it); at
// Close the subscriber counts what its ring still holds past the reader,
// so such a tick is a named loss, never silent (the CLI's NATS-outage test
// saw a subscriber close without the new epoch's first tick and lost 0).
func TestReader_Undelivered_CountsTicksPastTheReader(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 5 * time.Millisecond})
	r.Reader().AwaitEpoch() // as the subscriber: no epoch record yet
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 3 })
	n, _, _ := r.Reader().Undelivered()
	assert.Zero(t, n, "everything written was delivered")
	_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)
	n, _, _ = r.Reader().Undelivered()
	assert.Zero(t, n, "a tick within the lap is Poll's to deliver, not left behind")

	// a newer epoch's home, far ahead, writes into the same ring
	home2, err := NewHome(tp.dev, HomeConfig{Start: 1 << 22})
	require.NoError(t, err)
	t.Cleanup(func() { _ = home2.Close() })
	cq := newCQ(t, tp.dev, 64)
	hq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	w2, err := NewWriter(WriterConfig{Device: tp.dev, CQ: cq, HomeQP: hq, Home: home2.Desc(), Timeout: 2 * time.Second, PublisherID: 7})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w2.Close() })
	tp.connect(w2, 0, tp.rings[0])
	seq, err := w2.Publish(0, payloadFor(9, 8), 0)
	require.NoError(t, err)
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		r.Reader().Poll(&c)
	}
	require.Len(t, c.ticks, 4, "the reader cannot place a tick of an epoch it has no record of")
	n, from, to := r.Reader().Undelivered()
	assert.Equal(t, uint64(1), n)
	assert.Equal(t, seq, from)
	assert.Equal(t, seq, to)
}

// Two epochs begin before the reader leaves the first one's unused range
// (a home killed and its successor stopped at once): the reader told both
// starts names each ended epoch's unused range as its EventEpoch and
// delivers the middle epoch's ticks, instead of taking those ticks, below
// the newest start, for a later lap of its own epoch and naming the range
// a gap or an overrun (the chaos test saw ~3.9 M sequences named so, more
// than were ever claimed).
func TestReader_TwoNewEpochsBeforeThePollerPassesTheFirst_EachUnusedRangeIsItsEpochEvent(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1024, GapTimeout: 20 * time.Millisecond})
	rd := r.Reader()
	for i := 1; i <= 10; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 10 })
	const s2, s3 = 1 << 22, 2<<22 + 512 // their ticks in slots 0.. and 512..
	w2 := tp.newEpoch(t, s2, r)
	for i := 0; i < 3; i++ {
		_, err := w2.Publish(0, payloadFor(uint64(s2+i), 8), 0)
		require.NoError(t, err)
	}
	w3 := tp.newEpoch(t, s3, r)
	for i := 0; i < 5; i++ {
		_, err := w3.Publish(0, payloadFor(uint64(s3+i), 8), 0)
		require.NoError(t, err)
	}
	rd.SetEpoch(s2, s2+1<<22)
	rd.SetEpoch(s3, s3+1<<22)
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 18 })
	assert.Equal(t, []Event{{Kind: EventEpoch, From: 11, To: s2 - 1}, {Kind: EventEpoch, From: s2 + 3, To: s3 - 1}}, c.events)
	for i, want := range []uint64{s2, s2 + 1, s2 + 2, s3, s3 + 1, s3 + 2, s3 + 3, s3 + 4} {
		assert.Equal(t, want, c.ticks[10+i].Seq)
	}
	st := rd.Stats()
	assert.Zero(t, st.Gap+st.Overrun)
	assert.Equal(t, st.Next-1, st.Delivered+st.Gap+st.Overrun+st.Corrupt+st.Skip+st.Epoch, "every sequence accounted for")
}
