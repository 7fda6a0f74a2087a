package dash

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/stats"
)

// The same in a browser, fed by real subscribers: `tickbus demo` runs an
// embedded NATS server, a publisher and two subscriber processes and starts
// the dashboard. The test listens to the stats on the demo's NATS server
// itself and checks that what the page shows for each subscriber is the
// histogram that subscriber sent for that interval.
func TestChromium_Demo_ShowsRealSubscribers(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skip("headless Chromium not found at " + chromiumPath + " (Debian package chromium; CI installs it)")
	}
	if testing.Short() {
		t.Skip("builds the tickbus binary and runs the demo's processes; skipped with -short")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is needed to build tickbus for this test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	t0 := time.Now()
	br := startBrowser(t, ctx) // starts while tickbus builds
	bin := filepath.Join(t.TempDir(), "tickbus")
	build := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/tickbus/tickbus/cmd/tickbus")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	t.Logf("built tickbus in %v", time.Since(t0))

	demo := exec.CommandContext(ctx, bin, "demo", "--duration", "60s", "--rate", "2000", "--idle", "yield", "--dash", "127.0.0.1:0")
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	demo.Cancel = func() error { return syscall.Kill(-demo.Process.Pid, syscall.SIGKILL) }
	stdout, err := demo.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	demo.Stderr = &lockedWriter{w: &stderr}
	require.NoError(t, demo.Start())
	exited := make(chan struct{})
	go func() { _ = demo.Wait(); close(exited) }()
	// The demo has served its purpose once the page is checked: end it and
	// its children rather than wait out its feed.
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	natsURL, dashURL := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		natsRe := regexp.MustCompile(`NATS at (nats://\S+),`)
		dashRe := regexp.MustCompile(`^dashboard: (http://\S+)`)
		for sc.Scan() {
			if m := natsRe.FindStringSubmatch(sc.Text()); m != nil {
				natsURL <- m[1]
			}
			if m := dashRe.FindStringSubmatch(sc.Text()); m != nil {
				dashURL <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var nurl, durl string
	for nurl == "" || durl == "" {
		select {
		case nurl = <-natsURL:
		case durl = <-dashURL:
		case <-ctx.Done():
			t.Fatalf("demo printed no NATS and dashboard URLs; stderr:\n%s", stderr.String())
		}
	}

	// Listen to what the subscribers send, as the dashboard does.
	// The demo's server requires this user's embedded token, as the
	// dashboard finds it.
	token, err := bus.EmbeddedToken()
	require.NoError(t, err)
	nc, err := nats.Connect(nurl, nats.Token(token))
	require.NoError(t, err)
	defer nc.Close()
	type key struct {
		sub string
		end int64
	}
	var mu sync.Mutex
	sent := map[key]*hdrhistogram.Histogram{}
	_, err = nc.Subscribe(stats.SubjectAll(""), func(m *nats.Msg) {
		msg, err := stats.Decode(m.Data)
		if err != nil {
			return
		}
		h, err := msg.LatencyHistogram()
		if err != nil {
			return
		}
		mu.Lock()
		sent[key{msg.Subscriber, msg.End.UnixMilli()}] = h
		mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	t.Logf("demo up at %v: %s, %s", time.Since(t0), nurl, durl)
	page, err := br.open(ctx, durl, 1400, 1300)
	require.NoError(t, err)
	t.Logf("page open at %v", time.Since(t0))
	var r pageReport
	for {
		v, err := br.eval(ctx, page, `(document.getElementById("tb-state") || {}).textContent || "{}"`)
		require.NoError(t, err)
		var text string
		require.NoError(t, json.Unmarshal(v, &text))
		r = pageReport{}
		require.NoError(t, json.Unmarshal([]byte(text), &r))
		ok := r.Ready && r.Live && len(r.Series) == 2
		for _, s := range r.Series {
			ok = ok && s.Drawn["p99"] >= 3 && s.Shown["p50"].NS > 0
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the page never showed two subscribers with data; last report %+v; demo stderr:\n%s", r, stderr.String())
		case <-exited:
			t.Fatalf("the demo exited before the page showed two subscribers; last report %+v; demo stderr:\n%s", r, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("page shows both subscribers at %v", time.Since(t0))
	for _, s := range r.Series {
		assert.GreaterOrEqual(t, s.Drawn["p99"], 3, "%s: points drawn", s.Key)
		assert.Equal(t, s.Drawn["p50"], s.Drawn["max"], "%s", s.Key)
		assert.Greater(t, s.Dist["total"], 2, "%s: distribution drawn", s.Key)
		mu.Lock()
		h := sent[key{s.Subscriber, s.LastEnd}]
		mu.Unlock()
		require.NotNil(t, h, "%s: the test saw the interval ending %d the page shows", s.Key, s.LastEnd)
		want := map[string]int64{"p50": h.ValueAtQuantile(50), "p99": h.ValueAtQuantile(99), "p999": h.ValueAtQuantile(99.9), "max": h.Max()}
		for k, ns := range want {
			assert.Equal(t, ns, s.Shown[k].NS, "%s %s", s.Key, k)
			v, err := parseShown(s.Shown[k].Text)
			require.NoError(t, err)
			assert.InEpsilon(t, float64(ns), v, 0.01, "%s %s shown as %q", s.Key, k, s.Shown[k].Text)
		}
	}
	png, err := br.screenshot(ctx, page)
	require.NoError(t, err)
	dir := os.Getenv("TICKBUS_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	shot := filepath.Join(dir, "dashboard-demo.png")
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("dashboard screenshot with real subscribers: %s (%d bytes)", shot, len(png))
}
