package stats

import (
	"runtime"
	"sync"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestRecorder_Record_AllocatesNothing(t *testing.T) {
	r := NewRecorder()
	v := int64(0)
	allocs := testing.AllocsPerRun(10000, func() {
		v += 997
		r.Record(v % (2 * HighestValue))
	})
	assert.Zero(t, allocs)
}

func TestRecorder_RecordAll_AllocatesNothing(t *testing.T) {
	r := NewRecorder()
	vs := make([]int64, 256)
	v := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range vs {
			v += 997
			vs[i] = v % (2 * HighestValue)
		}
		r.RecordAll(vs)
	})
	assert.Zero(t, allocs)
}

// RecordAll of a run of values is Record of each: the same histogram, the
// same clamped counts.
func TestRecorder_RecordAll_IsRecordOfEach(t *testing.T) {
	vs := []int64{-7, 0, 1, 999, 1_000_001, HighestValue, HighestValue + 1, 42, 42}
	one, all := NewRecorder(), NewRecorder()
	for _, v := range vs {
		one.Record(v)
	}
	all.RecordAll(vs)
	all.RecordAll(nil)
	a, b := one.Snapshot(), all.Snapshot()
	assert.Equal(t, int64(len(vs)), b.Histogram.TotalCount())
	assert.Equal(t, a.Histogram.Export().Counts, b.Histogram.Export().Counts)
	assert.Equal(t, a.Negative, b.Negative)
	assert.Equal(t, a.Saturated, b.Saturated)
	assert.EqualValues(t, 1, b.Negative)
	assert.EqualValues(t, 1, b.Saturated)
}

func TestRecorder_Snapshot_ReturnsIntervalAndResets(t *testing.T) {
	r := NewRecorder()
	for i := int64(1); i <= 1000; i++ {
		r.Record(i * 1000)
	}
	iv := r.Snapshot()
	require.NotNil(t, iv.Histogram)
	assert.Equal(t, int64(1000), iv.Histogram.TotalCount())
	assert.True(t, iv.Histogram.ValuesAreEquivalent(500_000, iv.Histogram.ValueAtQuantile(50)))
	assert.True(t, iv.Histogram.ValuesAreEquivalent(1_000_000, iv.Histogram.Max()))
	assert.False(t, iv.End.Before(iv.Start))
	assert.Equal(t, iv.End.UnixMilli(), iv.Histogram.EndTimeMs())

	r.Record(42)
	iv2 := r.Snapshot()
	assert.Equal(t, int64(1), iv2.Histogram.TotalCount(), "second interval holds only what came after the first snapshot")
	assert.Equal(t, iv.End, iv2.Start, "intervals are contiguous")
	assert.Equal(t, int64(1000), iv.Histogram.TotalCount(), "the first interval's histogram is the caller's and unchanged")

	iv3 := r.Snapshot()
	assert.Zero(t, iv3.Histogram.TotalCount())
}

func TestRecorder_Record_ClampsAndCountsOutOfRange(t *testing.T) {
	r := NewRecorder()
	r.Record(-5)
	r.Record(HighestValue + 1)
	r.Record(int64(1) << 62)
	r.Record(7)
	iv := r.Snapshot()
	assert.Equal(t, uint64(1), iv.Negative)
	assert.Equal(t, uint64(2), iv.Saturated)
	assert.Equal(t, int64(4), iv.Histogram.TotalCount(), "clamped values are recorded, not dropped")
	assert.Equal(t, int64(0), iv.Histogram.Min())
	assert.True(t, iv.Histogram.ValuesAreEquivalent(HighestValue, iv.Histogram.Max()))
	iv = r.Snapshot()
	assert.Zero(t, iv.Negative)
	assert.Zero(t, iv.Saturated)
}

func TestRecorder_SnapshotInto_ReusesHistogram(t *testing.T) {
	r := NewRecorder()
	var iv Interval
	seen := map[*hdrhistogram.Histogram]bool{}
	for i := int64(1); i <= 20; i++ {
		r.Record(i * 10)
		r.SnapshotInto(&iv)
		seen[iv.Histogram] = true
		if !assert.Equal(t, int64(1), iv.Histogram.TotalCount(), "interval %d", i) {
			return
		}
		assert.True(t, iv.Histogram.ValuesAreEquivalent(i*10, iv.Histogram.Max()))
	}
	assert.Len(t, seen, 1, "the caller's histogram is filled again each interval; nothing else is allocated")

	// A histogram of another geometry is not adopted.
	iv.Histogram = hdrhistogram.New(1, 1000, 2)
	r.SnapshotInto(&iv)
	assert.Equal(t, HighestValue, iv.Histogram.HighestTrackableValue())
}

// countIndex is hdrhistogram-go's index for the recorder's geometry, and
// indexValue its inverse: values across the whole range (each power of two's
// edges, and a log-spread sweep) counted by index and moved into a histogram
// give the counts recording each value into the histogram gives.
func TestCountIndex_MatchesHistogram(t *testing.T) {
	var vs []int64
	for p := 0; p < 34; p++ {
		for _, d := range []int64{-1, 0, 1} {
			if v := int64(1)<<p + d; v >= 0 && v <= HighestValue {
				vs = append(vs, v)
			}
		}
	}
	for v := float64(1); v <= float64(HighestValue); v *= 1.0007 {
		vs = append(vs, int64(v))
	}
	vs = append(vs, 0, HighestValue)
	want, got := NewHistogram(), NewHistogram()
	b := newPhaseBuf()
	for _, v := range vs {
		require.NoError(t, want.RecordValue(v))
		i := countIndex(v)
		require.True(t, i >= 0 && i < countSlots, "value %d: index %d of %d", v, i, countSlots)
		require.LessOrEqual(t, indexValue(i), v, "value %d", v)
		require.Equal(t, i, countIndex(indexValue(i)), "value %d", v)
		b.counts[i]++
	}
	b.drainInto(got)
	assert.Equal(t, want.Export().Counts, got.Export().Counts)
	assert.Equal(t, want.TotalCount(), got.TotalCount())
	for _, c := range b.counts {
		require.Zero(t, c, "drained")
	}
	// Each single value lands where the histogram puts it.
	for _, v := range []int64{0, 1, 2047, 2048, 2049, 4095, 4096, 123_456, 987_654_321, HighestValue} {
		h := NewHistogram()
		require.NoError(t, h.RecordValue(v))
		cs := h.Export().Counts
		require.Greater(t, len(cs), countIndex(v))
		assert.EqualValues(t, 1, cs[countIndex(v)], "value %d", v)
	}
}

// A writer records without pause (single values and runs) while a reader
// snapshots: every value lands in exactly one interval, and none is lost
// or counted twice.
func TestRecorder_ConcurrentSnapshot_LosesNothing(t *testing.T) {
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	r := NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var run [37]int64 // odd-sized runs, so sections straddle the snapshots at every phase
		for i := 0; i < n; {
			if i%2 == 0 || n-i < len(run) {
				r.Record(int64(i%5000) + 1)
				i++
			} else {
				for k := range run {
					run[k] = int64((i+k)%5000) + 1
				}
				r.RecordAll(run[:])
				i += len(run)
			}
			if i%1024 < 2 {
				runtime.Gosched() // two shared cores: let the reader run
			}
		}
	}()
	var total int64
	var iv Interval
	var wg sync.WaitGroup
	snaps := 0
	for {
		select {
		case <-done:
			wg.Wait()
			r.SnapshotInto(&iv)
			total += iv.Histogram.TotalCount()
			assert.Equal(t, int64(n), total)
			t.Logf("%d snapshots during %d records", snaps, n)
			return
		default:
			r.SnapshotInto(&iv)
			total += iv.Histogram.TotalCount()
			snaps++
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// cpuNs is the process's CPU time (user and system) in nanoseconds. On a
// shared machine ns/op measures our share of the CPU as much as the code;
// CPU time per op does not.
func cpuNs(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkRecorder_Record(b *testing.B) {
	r := NewRecorder()
	b.ReportAllocs()
	v := int64(0)
	c0 := cpuNs(b)
	for b.Loop() {
		v += 7919
		if v > 5_000_000 {
			v = 100
		}
		r.Record(v)
	}
	b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRecorder_RecordAll is per value, in runs of 256 (a subscriber
// poll's batch): the phaser's two atomic adds once per run.
func BenchmarkRecorder_RecordAll(b *testing.B) {
	r := NewRecorder()
	vs := make([]int64, 256)
	v := int64(0)
	for i := range vs {
		v += 7919
		vs[i] = v
	}
	b.ReportAllocs()
	c0 := cpuNs(b)
	n := 0
	for b.Loop() {
		r.RecordAll(vs)
		n += len(vs)
	}
	b.ReportMetric(float64(cpuNs(b)-c0)/float64(n), "cpu-ns/value")
}

// Baseline: the bare histogram without the phaser.
func BenchmarkHistogram_RecordValue(b *testing.B) {
	h := NewHistogram()
	b.ReportAllocs()
	v := int64(0)
	c0 := cpuNs(b)
	for b.Loop() {
		v += 7919
		if v > 5_000_000 {
			v = 100
		}
		_ = h.RecordValue(v)
	}
	b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkRecorder_SnapshotInto is one interval's end as the stats loop
// takes it (1000 values recorded, over the timer), off the hot path but on
// a core a hot thread may need: per snapshot.
func BenchmarkRecorder_SnapshotInto(b *testing.B) {
	r := NewRecorder()
	vs := make([]int64, 1000)
	for i := range vs {
		vs[i] = int64(500 + i*37)
	}
	var iv Interval
	b.ReportAllocs()
	c0 := cpuNs(b)
	for b.Loop() {
		b.StopTimer()
		r.RecordAll(vs)
		b.StartTimer()
		r.SnapshotInto(&iv)
	}
	b.ReportMetric(float64(cpuNs(b)-c0)/float64(b.N), "cpu-ns/op")
}
