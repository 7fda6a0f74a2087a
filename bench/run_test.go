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
	if testing.Short() {
		cfg.Scaling = false // 7 more topologies of up to 9 processes; the full run covers them
	}
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
	if cfg.Scaling {
		for _, name := range []string{"scaling.json", "scaling.svg"} {
			_, err := os.Stat(filepath.Join(cfg.Out, name))
			assert.NoError(t, err, name)
		}
	}
}

func TestRun_PingPong_MeasuresRoundTrips(t *testing.T) {
	cfg := smallest(t)
	cfg.PingPong = true
	cfg.Scaling = false
	cfg.Cases = []string{CaseTickbusShm, CaseNATS, CaseChan, CaseFloor}
	if testing.Short() {
		cfg.Cases = []string{CaseTickbusShm, CaseFloor}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, Run(ctx, cfg, &out), out.String())
	t.Log("\n" + out.String())
	raw, err := os.ReadFile(cfg.JSON)
	require.NoError(t, err)
	var cases []Result
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Len(t, cases, len(cfg.Cases))
	for _, c := range cases {
		assert.Equal(t, "round-trip", c.Mode, c.Case)
		if assert.NotNil(t, c.P50, c.Case) {
			assert.Positive(t, *c.P50, c.Case)
		}
		// Every paced tick is a sample: a round trip, or (if the publisher
		// fell behind on this busy machine) a lower bound.
		assert.Equal(t, int64(cfg.Rate)*int64(cfg.Duration)/int64(time.Second), c.Samples, c.Case)
	}
	assert.Contains(t, out.String(), "round trip")
}

func TestRunPair_ChildThatCannotStart_IsAnErrorNotAHang(t *testing.T) {
	cfg := smallest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A floor run without its shared regions: the children cannot map fd 3.
	_, err := runPair(ctx, cfg, pairSpec{transport: CaseFloor, mode: modeLatency, pubs: 1, subs: 1, batch: 1, duration: 50 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "floor region")
}

func TestRun_UnavailableCase_IsARowThatSaysWhy(t *testing.T) {
	cfg := smallest(t)
	cfg.Cases = []string{CaseTickbusTCP}
	c := newCase(CaseTickbusTCP)
	err := c.setup(context.Background(), cfg)
	require.NoError(t, c.close())
	if err == nil {
		t.Skip("tickbus-tcp is available in this build; nothing to check")
	}
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), cfg, &out))
	assert.Contains(t, out.String(), "tickbus-tcp: unavailable")
}

func TestRun_TickbusShm_LossyFAA_ScalesWithoutLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("eleven process topologies; the quick run covers the reliable CAS path")
	}
	cfg := smallest(t)
	cfg.Cases = []string{CaseTickbusShm}
	cfg.RingMode = "lossy"
	cfg.Claim = "faa"
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, Run(ctx, cfg, &out), out.String())
	raw, err := os.ReadFile(filepath.Join(cfg.Out, "scaling.json"))
	require.NoError(t, err)
	var pts []ScalePoint
	require.NoError(t, json.Unmarshal(raw, &pts))
	require.Len(t, pts, len(fanOutPoints)+len(contentionPoints))
	for _, p := range pts {
		assert.Empty(t, p.Err, "%s %d", p.Kind, p.N)
		assert.Positive(t, p.Delivered, "%s %d", p.Kind, p.N)
	}
}

// --pprof and --trace write, per child process and run, a CPU profile
// (gzipped protobuf) and an execution trace (its header names the Go
// release that wrote it).
func TestRun_ProfileAndTrace_WrittenPerChild(t *testing.T) {
	cfg := smallest(t)
	cfg.Cases = []string{CaseFloor}
	cfg.Scaling = false
	cfg.Profile, cfg.Trace = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, Run(ctx, cfg, &out), out.String())
	for _, role := range []string{"pub0", "sub0"} {
		base := filepath.Join(cfg.Out, "floor-tp-b16-1p1s-"+role)
		prof, err := os.ReadFile(base + ".pprof")
		if assert.NoError(t, err, role) {
			assert.True(t, bytes.HasPrefix(prof, []byte{0x1f, 0x8b}), "%s: the profile is not gzipped", role)
		}
		tr, err := os.ReadFile(base + ".trace")
		if assert.NoError(t, err, role) {
			assert.True(t, bytes.HasPrefix(tr, []byte("go 1.")), "%s: the trace's header: %q", role, tr[:min(len(tr), 16)])
			assert.Greater(t, len(tr), 1024, "%s: a trace with no events", role)
		}
	}
}
