package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holeRig is a 4096-slot ring whose reader waits at 1 while sequence
// 3001 is present: 1..3000 were claimed by a publisher that died before
// it wrote any of them.
func holeRig(t *testing.T) *Reader {
	t.Helper()
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	dead := tp.addWriter(WriterConfig{PublisherID: 66})
	r := tp.addRing(RingConfig{Slots: 1 << 12, GapTimeout: 30 * time.Millisecond}, tp.w, dead)
	lost, err := dead.claim(3000)
	require.NoError(t, err)
	require.Equal(t, uint64(1), lost)
	_, err = tp.w.Publish(0, payloadFor(3001, 8), 0)
	require.NoError(t, err)
	return r.Reader()
}

// idleCheckAt runs one idle check as the 64th empty poll, with the
// previous idle check prev ago.
func idleCheckAt(rd *Reader, h Handler, prev time.Duration) int {
	rd.idle = 63
	rd.lastIdle = monoNs() - int64(prev)
	return rd.idleCheck(h)
}

// A fast loop's scan for later sequences reads scanChunk stamps per idle
// check until it finds one, so a tick arriving meanwhile waits for a
// chunk, not a ring; the hole is still found and reported once the gap
// timeout has passed.
func TestReader_GapScan_SpreadsOverAFastLoopsIdleChecks(t *testing.T) {
	rd := holeRig(t)
	var c collector
	idleCheckAt(rd, &c, time.Microsecond)
	require.NotZero(t, rd.scanEnd, "the scan ended within one idle check")
	assert.Equal(t, uint64(2+scanChunk), rd.scanAt, "the first idle check read more or less than one chunk")
	checks := 1
	for rd.scanEnd != 0 {
		at := rd.scanAt
		idleCheckAt(rd, &c, time.Microsecond)
		checks++
		if rd.scanEnd != 0 {
			require.Equal(t, at+scanChunk, rd.scanAt, "idle check %d", checks)
		}
	}
	assert.Equal(t, (3000+scanChunk-1)/scanChunk, checks, "idle checks to reach sequence 3001")
	assert.Equal(t, uint64(3001), rd.gapLimit, "the scan's find")
	assert.NotZero(t, rd.gapSince, "no gap check pending after the scan")
	assert.Empty(t, c.events, "reported before the gap timeout")

	pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 1 })
	assert.Equal(t, []Event{{Kind: EventGap, From: 1, To: 3000}}, c.events)
	assert.Equal(t, uint64(3001), c.ticks[0].Seq)
	assert.Equal(t, uint64(3000), rd.Stats().Gap)
}

// A yielding loop between the ticks of a 20 k/s feed has its idle checks
// some 64 µs apart: its scan is spread too (it was read whole in one idle
// check, which a tick then waited for), in chunks that end it within its
// cadence, a gap timeout / 8.
func TestReader_GapScan_EndsWithinItsCadenceInAYieldingLoop(t *testing.T) {
	rd := holeRig(t) // gap timeout 30 ms: cadence 3.75 ms, 58 checks 64 µs apart
	var c collector
	const every = 64 * time.Microsecond
	idleCheckAt(rd, &c, every)
	require.NotZero(t, rd.scanEnd, "the whole scan in one idle check")
	first := rd.scanAt - 2
	assert.Greater(t, first, uint64(scanChunk), "a chunk too small to end within the cadence")
	assert.Less(t, first, uint64(200), "a chunk much larger than the cadence needs")
	checks := 1
	for rd.scanEnd != 0 && checks < 1000 {
		idleCheckAt(rd, &c, every)
		checks++
	}
	assert.LessOrEqual(t, checks, int((30*time.Millisecond/8)/every), "idle checks to reach sequence 3001")
	assert.Equal(t, uint64(3001), rd.gapLimit, "the scan's find")
	assert.NotZero(t, rd.gapSince)
}

func TestReader_ScanLimit(t *testing.T) {
	r := &Reader{gapTimeout: int64(80 * time.Millisecond), mask: 1<<18 - 1} // cadence 10 ms
	assert.Equal(t, uint64(scanChunk), r.scanLimit(0), "no interval yet")
	assert.Equal(t, uint64(scanChunk), r.scanLimit(int64(time.Microsecond)), "a spinning loop")
	assert.Equal(t, uint64(1<<18-1)/100+1, r.scanLimit(int64(100*time.Microsecond)), "100 checks per cadence")
	assert.Equal(t, ^uint64(0), r.scanLimit(int64(10*time.Millisecond)), "a parking loop")
	r.mask = 1<<12 - 1
	assert.Equal(t, uint64(scanChunk), r.scanLimit(int64(100*time.Microsecond)), "a small ring: the least chunk")
}

// A loop whose idle checks are far apart (it parks between polls) scans
// the ring in one idle check, so its gap detection is not slowed by a
// scan spread over many of them.
func TestReader_GapScan_AtOnceInASlowLoop(t *testing.T) {
	rd := holeRig(t)
	var c collector
	idleCheckAt(rd, &c, time.Second)
	assert.Zero(t, rd.scanEnd, "a scan is still under way after a slow loop's idle check")
	assert.Equal(t, uint64(3001), rd.gapLimit)
	assert.NotZero(t, rd.gapSince)
}

// A scan begun for one position is dropped when the reader moved on
// before it ended (its finds would be about the old position).
func TestReader_GapScan_DroppedWhenTheReaderMoves(t *testing.T) {
	rd := holeRig(t)
	var c collector
	idleCheckAt(rd, &c, time.Microsecond)
	require.NotZero(t, rd.scanEnd)
	rd.next = 5            // as if 1..4 had been delivered
	rd.lastScan = monoNs() // and the cadence not yet due again
	idleCheckAt(rd, &c, time.Microsecond)
	assert.Zero(t, rd.scanEnd, "the old position's scan went on")
}
