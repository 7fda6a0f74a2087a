package stats

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/stats/hdrjs"
)

// What a subscriber sends decodes, with a reader tickbus did not write
// (hdr-histogram-js in node), to the same counts and percentiles as the
// values recorded.
func TestMessage_Histogram_ReadByHdrHistogramJS(t *testing.T) {
	js := hdrjs.Setup(t)
	rng := rand.New(rand.NewPCG(1, 2))
	percentiles := []float64{0, 50, 90, 99, 99.9, 99.99, 100}

	var sent []string
	var want []*Interval
	rec := NewRecorder()
	rep := NewReporter(Meta{Topic: "md.AAPL", Subscriber: "engine-1", Host: "h", Provider: "shm"}, rec)
	for i := range 3 {
		own := NewHistogram()
		n := 20011 + i*4999
		for range n {
			// A latency-like shape: a body near 2 µs and a long tail.
			v := int64(1500 + rng.ExpFloat64()*800)
			if rng.IntN(1000) == 0 {
				v *= 1000
			}
			rec.Record(v)
			require.NoError(t, own.RecordValue(v))
		}
		m, err := rep.Next(Counters{Received: uint64(n)})
		require.NoError(t, err)
		b, err := Encode(m)
		require.NoError(t, err)
		got, err := Decode(b)
		require.NoError(t, err)
		sent = append(sent, got.Hist)
		want = append(want, &Interval{Histogram: own})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := js.Read(ctx, sent, "", percentiles)
	require.NoError(t, err)
	require.Len(t, res.Hists, len(sent))
	for i, h := range res.Hists {
		own := want[i].Histogram
		assert.Equal(t, own.TotalCount(), h.Count, "interval %d count", i)
		assert.Equal(t, own.Max(), h.Max, "interval %d max", i)
		for j, p := range percentiles {
			// The implementations pick the rank of a percentile differently:
			// hdrhistogram-go rounds p*n to the nearest count, hdr-histogram-js
			// (like HdrHistogram's Java) takes its ceiling. Either rank's
			// value is right; between them the values must agree to the
			// bucket (ValuesAreEquivalent: 3 significant digits).
			n := float64(own.TotalCount())
			ceilRank := math.Ceil(p / 100 * n)
			atCeil := own.ValueAtQuantile(100 * ceilRank / n)
			ok := own.ValuesAreEquivalent(own.ValueAtQuantile(p), h.Values[j]) || own.ValuesAreEquivalent(atCeil, h.Values[j])
			assert.True(t, ok, "interval %d p%v: go %d (or %d at the ceiling rank), hdr-histogram-js %d",
				i, p, own.ValueAtQuantile(p), atCeil, h.Values[j])
		}
	}
}
