package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// land has w write sequence seq, which it claimed earlier, into its
// targets now: the WRITE of a publish that was still on its way.
func land(t *testing.T, w *Writer, seq uint64) {
	t.Helper()
	w.stage(0, seq, 0, 0, payloadFor(seq, 8), 0)
	require.NoError(t, w.deliver(w.targets.Load(), 1))
}

// A reader held while its start was learnt starts at the first tick
// written into it (FirstWritten). A tick another writer claimed below
// that start lands afterwards: the reader has passed it and cannot
// deliver it in order, so the watch counts it in BelowStart, once. The
// sequences below the start that never land are not counted, nor is a
// tick landing after the watch ended; the watch's last look, when it is
// due, reads the whole window.
func TestReader_WatchBelow_CountsTicksLandingBelowTheStart(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	late := tp.addWriter(WriterConfig{PublisherID: 66})
	rd := tp.addRing(RingConfig{Slots: 64, GapTimeout: time.Hour}, tp.w, late).Reader()
	first, err := late.claim(3) // 1..3: claimed, their WRITEs on the way
	require.NoError(t, err)
	require.Equal(t, uint64(1), first)
	_, err = tp.w.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)

	from := rd.Next()
	start := rd.FirstWritten(5) // the home's counter, learnt late
	require.Equal(t, uint64(4), start, "the first tick written into the held ring")
	require.NoError(t, rd.StartAt(start))
	rd.WatchBelow(from, time.Hour)
	var c collector
	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 1 })
	idleCheckAt(rd, &c, time.Second)
	assert.Zero(t, rd.Stats().BelowStart, "counted sequences that never landed")

	land(t, late, 2)
	idleCheckAt(rd, &c, time.Second)
	assert.Equal(t, uint64(1), rd.Stats().BelowStart, "the tick that landed below the start")
	idleCheckAt(rd, &c, time.Second)
	assert.Equal(t, uint64(1), rd.Stats().BelowStart, "counted twice")

	land(t, late, 3)
	rd.below.until = 0 // the watch is due to end
	idleCheckAt(rd, &c, time.Second)
	assert.Equal(t, uint64(2), rd.Stats().BelowStart, "the last look missed a tick")
	assert.Nil(t, rd.below, "the watch did not end")
	land(t, late, 1)
	idleCheckAt(rd, &c, time.Second)
	assert.Equal(t, uint64(2), rd.Stats().BelowStart, "counted after the watch ended")

	for range 100 {
		rd.Poll(&c)
	}
	require.Len(t, c.ticks, 1, "a tick below the start was delivered")
	assert.Equal(t, uint64(4), c.ticks[0].Seq)
	assert.Empty(t, c.events)
	st := rd.Stats()
	assert.Equal(t, uint64(1), st.Delivered)
	assert.Zero(t, st.Gap+st.Overrun+st.Corrupt+st.Skip, "the ticks below the start are no loss of the ring's own")
}

// A window wider than the ring is cut to the ring below the start (older
// sequences share slots with the window's), and one from above the start
// or of no length watches nothing.
func TestReader_WatchBelow_WindowIsAtMostOneRing(t *testing.T) {
	mem := make([]byte, regionSize(8, 128))
	r := newReader(mem, &RingConfig{Slots: 8, SlotSize: 128, Mode: Lossy, Start: 1, MaxBatch: 4})
	require.NoError(t, r.StartAt(100))
	r.WatchBelow(1, time.Hour)
	require.NotNil(t, r.below)
	assert.Equal(t, uint64(92), r.below.from)
	assert.Equal(t, uint64(100), r.below.to)
	r.WatchBelow(100, time.Hour)
	assert.Nil(t, r.below, "an empty window")
	r.WatchBelow(200, time.Hour)
	assert.Nil(t, r.below, "a window above the start")
	r.WatchBelow(95, 0)
	assert.Nil(t, r.below, "no time to watch")
}

// The last look over a window of a big ring is spread over idle checks,
// belowChunk stamps each, as the watch's earlier looks are: no stall of
// thousands of loads in one poll. It still reads the whole window.
func TestReader_WatchBelow_LastLookIsChunked(t *testing.T) {
	const slots = 1024
	mem := make([]byte, regionSize(slots, 128))
	r := newReader(mem, &RingConfig{Slots: slots, SlotSize: 128, Mode: Lossy, Start: 1, MaxBatch: 4})
	require.NoError(t, r.StartAt(1001))
	r.WatchBelow(1, time.Hour)
	r.below.until = 0 // due: the last look begins
	r.below.at = 500  // where the earlier looks had got to
	var c collector
	stampAt(r.slots, 499*128).Store(499) // just behind the look: read last
	checks := 0
	for r.below != nil {
		idleCheckAt(r, &c, time.Second)
		checks++
		require.LessOrEqual(t, checks, 10, "the last look never ends")
	}
	assert.Equal(t, (1000+belowChunk-1)/belowChunk, checks, "idle checks of the last look")
	assert.Equal(t, uint64(1), r.Stats().BelowStart, "the last look missed the window's end")
}
