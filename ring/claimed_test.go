package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A tail the ring never got (its writers stopped writing to it while the
// topic went on: 4..6 were published by a writer that does not have this
// ring) leaves nothing later for the gap check: no event, however long the
// reader waits. Told the topic's counter (SetClaimed), the reader names
// the tail with one gap once the gap timeout passed, and goes on from
// there; a bound it is past, or a fenced one, changes nothing.
func TestReader_SetClaimed_NamesATailNothingFollows(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	other := tp.addWriter(WriterConfig{PublisherID: 77})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 20 * time.Millisecond}, tp.w).Reader()
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	for i := 4; i <= 6; i++ {
		_, err := other.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r, &c, func() bool { return len(c.ticks) == 3 })
	end := time.Now().Add(200 * time.Millisecond) // ten gap timeouts
	for time.Now().Before(end) {
		r.Poll(&c)
	}
	require.Empty(t, c.events, "a tail nothing follows was named without the counter")

	r.SetClaimed(FenceAdd + 9) // a fenced counter says nothing
	r.SetClaimed(2)            // behind the reader
	end = time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(end) {
		r.Poll(&c)
	}
	require.Empty(t, c.events, "a fenced or passed bound named something")

	tp2 := newTopo(t, HomeConfig{}, WriterConfig{})
	other2 := tp2.addWriter(WriterConfig{PublisherID: 78})
	rd := tp2.addRing(RingConfig{Slots: 64, GapTimeout: 20 * time.Millisecond}, tp2.w).Reader()
	for i := 1; i <= 3; i++ {
		_, err := tp2.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	for i := 4; i <= 6; i++ {
		_, err := other2.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c2 collector
	pollUntil(t, rd, &c2, func() bool { return len(c2.ticks) == 3 })
	rd.SetClaimed(7) // the home's counter: 1..6 were claimed
	assert.Equal(t, uint64(7), rd.Claimed())
	pollUntil(t, rd, &c2, func() bool { return len(c2.events) == 1 })
	assert.Equal(t, []Event{{Kind: EventGap, From: 4, To: 6}}, c2.events)
	assert.Equal(t, uint64(7), rd.Next())
	st := rd.Stats()
	assert.Equal(t, uint64(3), st.Gap)
	assert.Equal(t, st.Next-1, st.Delivered+st.Gap, "every sequence passed is delivered or named")

	// the stream goes on after the tail
	_, err := tp2.w.Publish(0, payloadFor(7, 8), 0)
	require.NoError(t, err)
	pollUntil(t, rd, &c2, func() bool { return len(c2.ticks) == 4 })
	assert.Equal(t, uint64(7), c2.ticks[3].Seq)
	assert.Len(t, c2.events, 1)
}

// A counter from a new epoch (the home failed over; the new home told it)
// can reach the reader before the epoch itself does. The gap it arms must
// not name the ended epoch's unused range lost: once the epoch start is
// known, that range is one EventEpoch, and only the new epoch's missing
// ticks are a gap. (The chaos test saw a subscriber name 4,198,240
// sequences lost where the publishers had claimed 104,224.)
func TestReader_SetClaimed_CounterOfANewEpoch_EpochLearntMeanwhile_NamesTheEpochNotAGap(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 150 * time.Millisecond}, tp.w).Reader()
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r, &c, func() bool { return len(c.ticks) == 3 })
	r.SetClaimed(105) // the new home's counter: its epoch starts at 100, 100..104 claimed
	end := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(end) { // the gap check arms with the counter as its end
		r.Poll(&c)
	}
	require.Empty(t, c.events)
	r.SetEpoch(100, 200)
	pollUntil(t, r, &c, func() bool { return len(c.events) == 2 })
	assert.Equal(t, []Event{{Kind: EventEpoch, From: 4, To: 99}, {Kind: EventGap, From: 100, To: 104}}, c.events)
	st := r.Stats()
	assert.Equal(t, uint64(5), st.Gap, "only the new epoch's claimed ticks are lost")
}

// The same with the new home's counter taken before its first claim: it is
// the new epoch's start, which is the ended epoch's reservation end, so the
// gap it armed ends exactly where the epoch learnt meanwhile starts. The
// whole range is the ended epoch's unused range, one EventEpoch, no gap
// (the chaos test named 17170097..20971520 a gap so, 3.8 M sequences,
// more than were ever claimed). Close's ClaimedTail splits it the same way.
func TestReader_SetClaimed_NewEpochsStartAsTheCounter_EpochLearntMeanwhile_IsOneEpochEvent(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64, GapTimeout: 150 * time.Millisecond}, tp.w).Reader()
	r.SetEpoch(1, 100) // the first epoch: 1..99 reserved
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r, &c, func() bool { return len(c.ticks) == 3 })
	r.SetClaimed(100) // the new home's counter: its epoch starts at 100, nothing claimed yet
	end := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(end) { // the gap check arms with the counter as its end
		r.Poll(&c)
	}
	require.Empty(t, c.events)
	next, epoch, limit := r.ClaimedTail()
	assert.Equal(t, [3]uint64{4, 0, 100}, [3]uint64{next, epoch, limit})
	r.SetEpoch(100, 200)
	next, epoch, limit = r.ClaimedTail()
	assert.Equal(t, [3]uint64{4, 100, 100}, [3]uint64{next, epoch, limit}, "Close names 4..99 the ended epoch's, nothing lost")
	pollUntil(t, r, &c, func() bool { return len(c.events) == 1 })
	assert.Equal(t, []Event{{Kind: EventEpoch, From: 4, To: 99}}, c.events)
	st := r.Stats()
	assert.Zero(t, st.Gap, "nothing of the new epoch was claimed")
}

// ClaimedTail (what Close names) judges the bound as the gap check does:
// nothing while the reader awaits its first epoch, and a known epoch start
// inside the tail splits off the ended epoch's unused range.
func TestReader_ClaimedTail_TrustsTheBoundAsTheGapCheckDoes(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 64}, tp.w).Reader()
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r, &c, func() bool { return len(c.ticks) == 3 })
	r.SetClaimed(105)
	next, epoch, end := r.ClaimedTail()
	assert.Equal(t, [3]uint64{4, 0, 105}, [3]uint64{next, epoch, end})
	r.SetEpoch(100, 200)
	next, epoch, end = r.ClaimedTail()
	assert.Equal(t, [3]uint64{4, 100, 105}, [3]uint64{next, epoch, end})

	r2 := tp.addRing(RingConfig{Slots: 64}, tp.w).Reader()
	r2.AwaitEpoch()
	r2.SetClaimed(105)
	_, _, end = r2.ClaimedTail()
	assert.Zero(t, end, "a reader awaiting its first epoch trusted a counter")
}
