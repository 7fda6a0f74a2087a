package dash

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const chromiumPath = "/usr/bin/chromium"

// pageReport is what app.js writes into #tb-state after each render.
type pageReport struct {
	Ready    bool `json:"ready"`
	Live     bool `json:"live"`
	Selected struct {
		Topic      string `json:"topic"`
		Subscriber string `json:"subscriber"`
	} `json:"selected"`
	Series []struct {
		Key        string         `json:"key"`
		Subscriber string         `json:"subscriber"`
		Intervals  uint64         `json:"intervals"`
		LastEnd    int64          `json:"last_end"`
		Drawn      map[string]int `json:"drawn"`
		Dist       map[string]int `json:"dist"`
		Shown      map[string]struct {
			NS   int64  `json:"ns"`
			Text string `json:"text"`
		} `json:"shown"`
	} `json:"series"`
}

// parseShown reads a formatted latency ("12.3µs") back into nanoseconds.
func parseShown(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		mul    float64
	}{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}} {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			return v * u.mul, err
		}
	}
	return 0, fmt.Errorf("no unit in %q", s)
}

// End to end in a real browser: stats from real recorders over a real NATS
// server reach the dashboard; headless Chromium, driven over the DevTools
// protocol, loads the page, waits for the data, sees both subscribers'
// charts drawn and the percentiles of the histograms sent, follows a live
// update over the event stream, and narrows the view with the selector.
func TestChromium_Dashboard_DrawsBothSubscribersAndShowsSentPercentiles(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("headless Chromium not found at " + chromiumPath + " (Debian package chromium; CI installs it)")
	}
	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	nc := connect(t, ns)
	feeds := []*feed{newFeed("md.AAPL", "engine-1", 21, 1800), newFeed("md.AAPL", "engine-2", 22, 12000)}
	send := func() {
		for j, f := range feeds {
			f.interval(t, nc, 3000+500*j+10*len(f.sent), uint64(j), 0)
		}
	}
	const intervals = 5
	for range intervals {
		send()
	}
	waitIntervals(t, s.URL(), map[string]uint64{"md.AAPL/engine-1": intervals, "md.AAPL/engine-2": intervals})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	br := startBrowser(t, ctx)
	page, err := br.open(ctx, s.URL(), 1400, 1300)
	require.NoError(t, err, "chromium: %s", br.stderr)

	report := func() pageReport {
		v, err := br.eval(ctx, page, `(document.getElementById("tb-state") || {}).textContent || "{}"`)
		require.NoError(t, err)
		var text string
		require.NoError(t, json.Unmarshal(v, &text))
		var r pageReport
		require.NoError(t, json.Unmarshal([]byte(text), &r), text)
		return r
	}
	// waitFor polls the page's report until ok says it is what we want.
	waitFor := func(what string, ok func(pageReport) bool) pageReport {
		t.Helper()
		for {
			r := report()
			if ok(r) {
				return r
			}
			select {
			case <-ctx.Done():
				t.Fatalf("page never showed %s; last report %+v", what, r)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	has := func(n uint64) func(pageReport) bool {
		return func(r pageReport) bool {
			if !r.Ready || !r.Live || len(r.Series) != 2 {
				return false
			}
			for _, s := range r.Series {
				if s.Intervals != n || s.Drawn["p99"] != int(n) {
					return false
				}
			}
			return true
		}
	}
	check := func(r pageReport, n int) {
		t.Helper()
		for i, f := range feeds {
			got := r.Series[i]
			assert.Equal(t, f.meta.Subscriber, got.Subscriber)
			for _, line := range []string{"p50", "p99", "p999", "max"} {
				assert.Equal(t, n, got.Drawn[line], "%s: points drawn for %s", got.Key, line)
			}
			assert.Greater(t, got.Dist["total"], 10, "%s: distribution curve drawn", got.Key)
			assert.Greater(t, got.Dist["last"], 10, "%s: last interval's curve drawn", got.Key)
			last := f.last()
			want := map[string]int64{"p50": last.ValueAtQuantile(50), "p90": last.ValueAtQuantile(90),
				"p99": last.ValueAtQuantile(99), "p999": last.ValueAtQuantile(99.9), "p9999": last.ValueAtQuantile(99.99), "max": last.Max()}
			for k, ns := range want {
				shown, ok := got.Shown[k]
				if !assert.True(t, ok, "%s: %s shown", got.Key, k) {
					continue
				}
				assert.Equal(t, ns, shown.NS, "%s %s", got.Key, k)
				v, err := parseShown(shown.Text)
				require.NoError(t, err)
				assert.InEpsilon(t, float64(ns), v, 0.01, "%s %s shown as %q, sent %d ns (3 significant digits)", got.Key, k, shown.Text, ns)
			}
		}
		// The SVG itself: 4 time lines per subscriber, each with n points.
		v, err := br.eval(ctx, page, `[...document.querySelectorAll("svg.timechart polyline")].map(p => p.points.numberOfItems)`)
		require.NoError(t, err)
		var counts []int
		require.NoError(t, json.Unmarshal(v, &counts))
		assert.Equal(t, []int{n, n, n, n, n, n, n, n}, counts)
	}

	r := waitFor("both subscribers' data", has(intervals))
	check(r, intervals)

	// A screenshot for people.
	dir := os.Getenv("TICKBUS_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	png, err := br.screenshot(ctx, page)
	require.NoError(t, err)
	require.Greater(t, len(png), 10000)
	require.Equal(t, "\x89PNG", string(png[:4]))
	shot := filepath.Join(dir, "dashboard.png")
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("dashboard screenshot: %s (%d bytes)", shot, len(png))

	// Live: a new interval arrives over the event stream, no reload.
	send()
	r = waitFor("the live update", has(intervals+1))
	check(r, intervals+1)

	// The selector narrows the view to one subscriber.
	_, err = br.eval(ctx, page, `(() => { const s = document.getElementById("subscriber");
		s.value = "engine-2"; s.dispatchEvent(new Event("change")); return s.value; })()`)
	require.NoError(t, err)
	r = waitFor("the selection", func(r pageReport) bool { return len(r.Series) == 1 })
	assert.Equal(t, "engine-2", r.Series[0].Subscriber)
	assert.Equal(t, "engine-2", r.Selected.Subscriber)
	v, err := br.eval(ctx, page, `location.hash`)
	require.NoError(t, err)
	assert.JSONEq(t, `"#subscriber=engine-2"`, string(v))
}
