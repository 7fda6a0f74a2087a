package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

// smallest is the quickest run that still exercises every case and output.
func smallest(t *testing.T) Config {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Quick = true
	cfg.Duration = 60 * time.Millisecond
	cfg.ThroughputDuration = 30 * time.Millisecond
	cfg.Rate = 2000
	cfg.Batch = 16
	cfg.Idle = "yield"
	cfg.JSON = filepath.Join(dir, "bench.json")
	cfg.Out = filepath.Join(dir, "out")
	return cfg
}

// jsonKeys is the shape the issue asks for, per case.
var jsonKeys = []string{"case", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns",
	"throughput_per_s", "batched_throughput_per_s", "cpu_s_per_million"}

func TestRun_Quick_WritesTableJSONAndHistogramLogs(t *testing.T) {
	cfg := smallest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := Run(ctx, cfg, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)

	raw, err := os.ReadFile(cfg.JSON)
	require.NoError(t, err)
	var cases []map[string]any
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Len(t, cases, len(AllCases))
	for i, c := range cases {
		for _, k := range jsonKeys {
			assert.Contains(t, c, k, "case %d", i)
		}
		name, _ := c["case"].(string)
		assert.Equal(t, AllCases[i], name)
		if note, _ := c["note"].(string); strings.HasPrefix(note, "unavailable") {
			continue
		}
		for _, k := range []string{"p50_ns", "p99_ns", "max_ns"} {
			v, ok := c[k].(float64)
			assert.True(t, ok && v > 0, "%s %s = %v, want a positive number", name, k, c[k])
		}
		if name == CaseJitter {
			assert.Nil(t, c["throughput_per_s"], "the probe has no throughput")
			continue
		}
		for _, k := range []string{"throughput_per_s", "batched_throughput_per_s", "cpu_s_per_million"} {
			v, ok := c[k].(float64)
			assert.True(t, ok && v > 0, "%s %s = %v, want a positive number", name, k, c[k])
		}
		// The hlog of every case that ran reads back to the same count.
		f, err := os.Open(filepath.Join(cfg.Out, name+".hlog"))
		if assert.NoError(t, err) {
			h, err := hdrhistogram.NewHistogramLogReader(f).NextIntervalHistogram()
			f.Close()
			if assert.NoError(t, err) && assert.NotNil(t, h) {
				assert.Equal(t, int64(c["samples"].(float64)), h.TotalCount(), name)
			}
		}
	}
	assert.Contains(t, out.String(), "ratio to tickbus-shm")
}
