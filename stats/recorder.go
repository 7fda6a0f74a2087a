package stats

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram geometry shared by every recorder and checked on every decoded
// message (DESIGN.md: 1 ns to 10 s, 3 significant digits).
const (
	LowestValue        int64 = 1
	HighestValue       int64 = int64(10 * time.Second)
	SignificantFigures       = 3
)

// NewHistogram returns an empty histogram of the recorder's geometry.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(LowestValue, HighestValue, SignificantFigures)
}

// Interval is what one interval recorded: the histogram and the values that
// had to be clamped into its range.
type Interval struct {
	Histogram *hdrhistogram.Histogram
	Start     time.Time // when the interval began (the previous snapshot)
	End       time.Time // when the snapshot was taken
	Negative  uint64    // latencies below 0 (clock skew), recorded as 0
	Saturated uint64    // latencies above HighestValue, recorded as HighestValue
}

// phaseBuf is one of the recorder's two buffers. Its fields are written only
// by the writer while the phaser says the buffer is active, and read or reset
// only by a reader after the phaser flipped away from it.
//
// counts is indexed as the histogram's own counts array (countIndex, the
// geometry's bucket and sub-bucket): a record is a shift, a subtraction and
// an increment, where hdrhistogram-go's RecordValue re-derives the geometry
// from the histogram's fields and checks its arguments (about 3 against 9
// CPU-ns per value here: BenchmarkRecorder_RecordAll beside
// BenchmarkHistogram_RecordValue). A snapshot moves the counts into a
// histogram, one RecordValues per non-empty bucket, so the interval's
// histogram holds what recording every value into it would have.
type phaseBuf struct {
	counts    []uint64 // countSlots; countIndex(v) for v in 0..HighestValue
	negative  uint64
	saturated uint64
}

// The histogram geometry's indexing (LowestValue 1, so unit magnitude 0;
// SignificantFigures 3, so 2048 sub-buckets, the lower half of each bucket
// after the first shared with the bucket below): what hdrhistogram-go's
// countsIndexFor computes for this geometry, checked against it for values
// across the range by TestCountIndex_MatchesHistogram.
const (
	subBucketHalfMag = 10
	subBucketHalf    = 1 << subBucketHalfMag
	subBucketMask    = 2*subBucketHalf - 1
)

// countSlots is the length of the counts array: one past HighestValue's index.
var countSlots = countIndex(HighestValue) + 1

// countIndex is v's index in the counts array; 0 <= v <= HighestValue.
func countIndex(v int64) int {
	b := bits.Len64(uint64(v)|subBucketMask) - (subBucketHalfMag + 1) // bucket
	return (b+1)<<subBucketHalfMag + int(v>>uint(b)) - subBucketHalf
}

// indexValue is the lowest value whose index is i (the inverse of countIndex).
func indexValue(i int) int64 {
	b := i>>subBucketHalfMag - 1
	sub := int64(i&(subBucketHalf-1)) + subBucketHalf
	if b < 0 {
		b, sub = 0, sub-subBucketHalf
	}
	return sub << uint(b)
}

func newPhaseBuf() *phaseBuf { return &phaseBuf{counts: make([]uint64, countSlots)} }

// drainInto adds the buffer's counts to h (of the recorder's geometry) and
// empties the buffer.
func (b *phaseBuf) drainInto(h *hdrhistogram.Histogram) {
	for i, c := range b.counts {
		if c != 0 {
			_ = h.RecordValues(indexValue(i), int64(c)) // in range by construction: cannot fail
			b.counts[i] = 0
		}
	}
	b.negative, b.saturated = 0, 0
}

// Recorder records latencies of one topic of one subscriber. Record has a
// single writer; Snapshot and SnapshotInto may be called from any goroutine
// (readers are serialised among themselves).
type Recorder struct {
	_ [128]byte // keep the writer's counters off a neighbour's lines
	// startEpoch counts record sections (one Record, or one RecordAll of
	// many values) begun in the current phase. The writer adds one (the add
	// pairs with the reader's Swap in flip); its sign is the phase: >= 0
	// even (buf[0]), < 0 odd (buf[1]).
	startEpoch atomic.Int64
	// evenEnd and oddEnd count sections finished in each phase, written by
	// the writer's add after the section's values; the reader loads them in
	// flip until they reach the start value it swapped out.
	evenEnd atomic.Int64
	oddEnd  atomic.Int64
	buf     [2]*phaseBuf
	_       [128]byte

	mu       sync.Mutex // readers only
	lastFlip time.Time
}

// NewRecorder returns a recorder whose first interval starts now.
func NewRecorder() *Recorder {
	r := &Recorder{
		buf:      [2]*phaseBuf{newPhaseBuf(), newPhaseBuf()},
		lastFlip: time.Now(),
	}
	r.oddEnd.Store(math.MinInt64)
	return r
}

// Record adds one latency in nanoseconds. It allocates nothing, takes no lock
// and makes no syscall: two uncontended atomic adds and a bucket increment.
// Only one goroutine may call Record or RecordAll.
func (r *Recorder) Record(latencyNs int64) {
	e := r.startEpoch.Add(1) - 1 // pairs with flip's Swap
	b := r.buf[0]
	if e < 0 {
		b = r.buf[1]
	}
	b.record(latencyNs)
	r.end(e)
}

// RecordAll adds every latency of vs (ns), each as Record would, in one
// section of the phaser: two atomic adds for the lot, not per value. The
// values land in one interval together. Only one goroutine may call Record
// or RecordAll.
func (r *Recorder) RecordAll(vs []int64) {
	if len(vs) == 0 {
		return
	}
	e := r.startEpoch.Add(1) - 1 // pairs with flip's Swap
	b := r.buf[0]
	if e < 0 {
		b = r.buf[1]
	}
	for _, v := range vs {
		b.record(v)
	}
	r.end(e)
}

// end closes the section begun at epoch e: flip waits for it.
func (r *Recorder) end(e int64) {
	if e < 0 {
		r.oddEnd.Add(1) // pairs with flip's Load of oddEnd
	} else {
		r.evenEnd.Add(1) // pairs with flip's Load of evenEnd
	}
}

// record adds one value, clamped into the histogram's range.
func (b *phaseBuf) record(latencyNs int64) {
	if latencyNs < 0 {
		b.negative++
		latencyNs = 0
	} else if latencyNs > HighestValue {
		b.saturated++
		latencyNs = HighestValue
	}
	b.counts[countIndex(latencyNs)]++ // 0 <= latencyNs <= HighestValue: in range
}

// flip moves the writer onto the other buffer and returns the index of the
// buffer it left, once no record is in flight on it. Caller holds r.mu.
func (r *Recorder) flip() int {
	nextEven := r.startEpoch.Load() < 0
	var start int64
	if nextEven {
		r.evenEnd.Store(0)
	} else {
		start = math.MinInt64
		r.oddEnd.Store(math.MinInt64)
	}
	atFlip := r.startEpoch.Swap(start) // pairs with Record's Add
	old, end := 1, &r.oddEnd
	if !nextEven {
		old, end = 0, &r.evenEnd
	}
	for end.Load() != atFlip { // a record begun before the flip is finishing
		runtime.Gosched()
	}
	return old
}

// SnapshotInto ends the current interval and hands it to dst: dst.Histogram
// is reset and receives the interval's counts, if it has the recorder's
// geometry (else a new histogram does), so a stats loop that keeps one
// Interval allocates nothing here.
func (r *Recorder) SnapshotInto(dst *Interval) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := dst.Histogram
	if h == nil || h.LowestTrackableValue() != LowestValue ||
		h.HighestTrackableValue() != HighestValue || h.SignificantFigures() != SignificantFigures {
		h = NewHistogram()
	}
	h.Reset()

	old := r.flip()
	now := time.Now()
	b := r.buf[old]
	// The writer touches buf[old] again only after the next flip, whose Swap
	// it observes through its Add: these plain reads and writes happen
	// before that.
	dst.Negative, dst.Saturated = b.negative, b.saturated
	b.drainInto(h)
	dst.Histogram = h
	dst.Start, dst.End = r.lastFlip, now
	r.lastFlip = now
	h.SetStartTimeMs(dst.Start.UnixMilli())
	h.SetEndTimeMs(dst.End.UnixMilli())
}

// snapshotEncoded ends the current interval as SnapshotInto does, but hands
// it out encoded (Message.Hist's form) by e, with no histogram in between:
// the stats loop's path (Reporter.Next). dst.Histogram is left alone.
func (r *Recorder) snapshotEncoded(dst *Interval, e *countsEncoder) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.flip()
	now := time.Now()
	b := r.buf[old]
	// As in SnapshotInto: the writer is on the other buffer until the next flip.
	dst.Negative, dst.Saturated = b.negative, b.saturated
	dst.Start, dst.End = r.lastFlip, now
	r.lastFlip = now
	hist, err := e.encode(b.counts)
	clear(b.counts)
	b.negative, b.saturated = 0, 0
	return hist, err
}

// Snapshot ends the current interval and returns it in a histogram the
// caller owns.
func (r *Recorder) Snapshot() Interval {
	var iv Interval
	r.SnapshotInto(&iv)
	return iv
}
