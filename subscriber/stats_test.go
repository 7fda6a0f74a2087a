package subscriber

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
)

func ticksAt(pub ...int64) []ring.Tick {
	ts := make([]ring.Tick, len(pub))
	for i, p := range pub {
		ts[i].PublishNs = p
	}
	return ts
}

// Latencies are held until record, then every one reaches the recorder
// with its value; a batch that does not fit pushes out what was held, and
// one larger than the buffer goes straight in: none is lost or doubled.
func TestLatencies_HoldsUntilRecord_LosesNone(t *testing.T) {
	rec := stats.NewRecorder()
	var l latencies
	l.add(rec, 1000, ticksAt(990, 900))
	assert.Zero(t, rec.Snapshot().Histogram.TotalCount(), "recorded before record")
	l.record(rec)
	iv := rec.Snapshot()
	require.EqualValues(t, 2, iv.Histogram.TotalCount())
	assert.EqualValues(t, 10, iv.Histogram.Min())
	assert.EqualValues(t, 100, iv.Histogram.Max())

	// Fill to one short of full, then a batch of two: the held ones are
	// recorded, the two are held.
	for range latencyBuffer - 1 {
		l.add(rec, 5000, ticksAt(4000))
	}
	l.add(rec, 5000, ticksAt(4990, 4980))
	iv = rec.Snapshot()
	assert.EqualValues(t, latencyBuffer-1, iv.Histogram.TotalCount(), "the full buffer is recorded before the batch")
	assert.Equal(t, 2, l.n)

	big := make([]ring.Tick, latencyBuffer+1)
	for i := range big {
		big[i].PublishNs = 7000
	}
	l.add(rec, 7007, big)
	assert.Zero(t, l.n)
	iv = rec.Snapshot()
	assert.EqualValues(t, 2+latencyBuffer+1, iv.Histogram.TotalCount(), "the held two, then the batch larger than the buffer")
	assert.EqualValues(t, 7, iv.Histogram.Min())
	assert.EqualValues(t, 20, iv.Histogram.Max())

	l.record(rec)
	assert.Zero(t, rec.Snapshot().Histogram.TotalCount(), "record of nothing records nothing")
}

func TestLatencies_AllocateNothing(t *testing.T) {
	rec := stats.NewRecorder()
	var l latencies
	ts := ticksAt(1, 2, 3)
	assert.Zero(t, testing.AllocsPerRun(10_000, func() {
		l.add(rec, 10, ts)
		if l.n > latencyBuffer/2 {
			l.record(rec)
		}
	}))
}
