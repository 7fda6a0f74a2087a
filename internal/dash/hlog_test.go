package dash

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/stats/hdrjs"
)

// hlogFixture runs a dashboard with --hlog, feeds it two series of three
// intervals each and returns the directory once the server closed its files.
func hlogFixture(t *testing.T) (string, []*feed) {
	ns := startNATS(t)
	dir := t.TempDir()
	// A file of the first series already exists: it must not be touched.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "md_AAPL.engine-1.hlog"), []byte("older run\n"), 0o644))
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}, HlogDir: dir})
	nc := connect(t, ns)
	feeds := []*feed{newFeed("md.AAPL", "engine-1", 11, 2500), newFeed("md.AAPL", "engine-2", 12, 800)}
	for i := range 3 {
		for _, f := range feeds {
			f.interval(t, nc, 4000+100*i, 0, 0)
		}
	}
	waitIntervals(t, s.URL(), map[string]uint64{"md.AAPL/engine-1": 3, "md.AAPL/engine-2": 3})
	require.NoError(t, s.Close())
	old, err := os.ReadFile(filepath.Join(dir, "md_AAPL.engine-1.hlog"))
	require.NoError(t, err)
	assert.Equal(t, "older run\n", string(old))
	return dir, feeds
}

func TestHlog_ReadByHdrHistogramGoLogReader(t *testing.T) {
	dir, feeds := hlogFixture(t)
	files := map[string]*feed{"md_AAPL.engine-1-1.hlog": feeds[0], "md_AAPL.engine-2.hlog": feeds[1]}
	for name, f := range files {
		fh, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err, name)
		head := make([]byte, 64)
		n, _ := fh.Read(head)
		assert.True(t, strings.HasPrefix(string(head[:n]), "#[Histogram log format version 1.3]"), "%q", head[:n])
		_, err = fh.Seek(0, io.SeekStart)
		require.NoError(t, err)
		r := hdrhistogram.NewHistogramLogReader(fh)
		var got []*hdrhistogram.Histogram
		for {
			h, err := r.NextIntervalHistogram()
			require.NoError(t, err)
			if h == nil {
				break
			}
			got = append(got, h)
		}
		_ = fh.Close()
		require.Len(t, got, len(f.sent), name)
		for i, h := range got {
			assert.Equal(t, f.sent[i].TotalCount(), h.TotalCount(), "%s interval %d", name, i)
			assert.Equal(t, f.sent[i].ValueAtQuantile(99.9), h.ValueAtQuantile(99.9), "%s interval %d", name, i)
			assert.Equal(t, f.sent[i].Max(), h.Max())
		}
	}
}

func TestHlog_ReadByHdrHistogramJS(t *testing.T) {
	js := hdrjs.Setup(t)
	dir, feeds := hlogFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	percentiles := []float64{50, 90, 99}
	for name, f := range map[string]*feed{"md_AAPL.engine-1-1.hlog": feeds[0], "md_AAPL.engine-2.hlog": feeds[1]} {
		res, err := js.Read(ctx, nil, filepath.Join(dir, name), percentiles)
		require.NoError(t, err)
		require.Len(t, res.Hlog, len(f.sent), name)
		for i, h := range res.Hlog {
			own := f.sent[i]
			assert.Equal(t, own.TotalCount(), h.Count, "%s interval %d", name, i)
			assert.Equal(t, own.Max(), h.Max, "%s interval %d", name, i)
			for j, p := range percentiles {
				assert.True(t, own.ValuesAreEquivalent(own.ValueAtQuantile(p), h.Values[j]),
					"%s interval %d p%v: go %d, hdr-histogram-js %d", name, i, p, own.ValueAtQuantile(p), h.Values[j])
			}
		}
		// Interval times survive: the last interval's absolute end, to the
		// millisecond (the log's fields are seconds with 3 decimals).
		assert.InDelta(t, float64(f.lastMsg.End.UnixMilli()), float64(res.Hlog[len(res.Hlog)-1].EndMs), 1)
	}
}
