package bench

import (
	"bytes"
	"context"
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
