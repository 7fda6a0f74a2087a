package bench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddFanOutCPU_MeasuresPublisherCostPerExtraSubscriber(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pts := []ScalePoint{{Kind: ScaleFanOut, N: 1}, {Kind: ScaleFanOut, N: 4}, {Kind: ScaleContention, N: 2}}
	require.NoError(t, addFanOutCPU(ctx, pts))
	t.Logf("pub CPU-ns/tick: N=1 %.1f, N=4 %.1f (+%.1f per extra)", pts[0].PubCPUNs, pts[1].PubCPUNs, pts[1].ExtraSubCPUNs)
	assert.Positive(t, pts[0].PubCPUNs)
	assert.Positive(t, pts[1].PubCPUNs)
	assert.Zero(t, pts[0].ExtraSubCPUNs, "the first point is the base")
	assert.Equal(t, (pts[1].PubCPUNs-pts[0].PubCPUNs)/3, pts[1].ExtraSubCPUNs)
	assert.Zero(t, pts[2].PubCPUNs, "contention points are not fan-out")

	var out bytes.Buffer
	writeScalingTable(&out, pts, nil)
	assert.Contains(t, out.String(), "+ns/extra sub")
	assert.Contains(t, out.String(), "target <= 15 ns")
}

// BenchmarkFanOutCPU repeats the bench's in-process fan-out measure
// (fanOutCPU: the publisher thread's CPU ns per single-tick Publish into N
// lossy rings, least of three runs of fanOutCPUTicks) for N = 1, 2, 4, 8,
// interleaved, b.N rounds, and reports each N's median and spread: how far
// one bench run's "+ns/extra sub" can be trusted. Run with -benchtime 9x.
func BenchmarkFanOutCPU(b *testing.B) {
	ctx := context.Background()
	got := make([][]float64, len(fanOutPoints))
	for i := 0; i < b.N; i++ {
		for k, n := range fanOutPoints {
			ns, err := fanOutCPU(ctx, n)
			require.NoError(b, err)
			got[k] = append(got[k], ns)
		}
	}
	for k, n := range fanOutPoints {
		v := append([]float64(nil), got[k]...)
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], fmt.Sprintf("N%d-med-ns", n))
		b.ReportMetric(v[0], fmt.Sprintf("N%d-min-ns", n))
		b.ReportMetric(v[len(v)-1], fmt.Sprintf("N%d-max-ns", n))
	}
}
