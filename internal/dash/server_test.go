package dash

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/stats"
)

func TestServer_State_MatchesHistogramsSent(t *testing.T) {
	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	nc := connect(t, ns)
	a := newFeed("md.AAPL", "engine-1", 1, 2000)
	b := newFeed("md.AAPL", "engine-2", 2, 9000)
	a.totals.Tail = 4           // as a closing subscriber's last message says
	b.totals.TailUnknown = true // a Close that could name no tail
	for i := range 3 {
		a.interval(t, nc, 5000+i, 1, 0)
		b.interval(t, nc, 3000+i, 0, 2)
	}
	st := waitIntervals(t, s.URL(), map[string]uint64{"md.AAPL/engine-1": 3, "md.AAPL/engine-2": 3})
	require.Len(t, st.Series, 2)
	for i, f := range []*feed{a, b} {
		v := st.Series[i]
		assert.Equal(t, f.meta.Subscriber, v.Subscriber)
		assert.Equal(t, f.meta.Host, v.Host)
		assert.Equal(t, "shm", v.Provider)
		assert.Equal(t, f.totals.Received, v.Received)
		assert.Equal(t, f.totals.Gaps, v.Gaps)
		assert.Equal(t, f.totals.Overruns, v.Overruns)
		assert.Equal(t, f.totals.Tail, v.Tail)
		assert.Equal(t, f.totals.TailUnknown, v.TailUnknown)
		assert.Len(t, v.Points, 3)
		last := f.last()
		assert.Equal(t, last.TotalCount(), v.Last.Count)
		assert.Equal(t, last.ValueAtQuantile(50), v.Last.P50)
		assert.Equal(t, last.ValueAtQuantile(99), v.Last.P99)
		assert.Equal(t, last.ValueAtQuantile(99.9), v.Last.P999)
		assert.Equal(t, last.Max(), v.Last.Max)
		assert.Equal(t, f.merged.TotalCount(), v.Total.Count)
		assert.Equal(t, f.merged.ValueAtQuantile(99), v.Total.P99)
		require.NotEmpty(t, v.Curve)
		assert.Equal(t, 100.0, v.Curve[len(v.Curve)-1].Q)
		assert.Equal(t, f.merged.Max(), v.Curve[len(v.Curve)-1].V)
		for j, p := range v.Points {
			assert.Equal(t, f.sent[j].ValueAtQuantile(99), p.P99, "point %d", j)
		}
	}
}

func TestServer_Metrics_ParseAndCountWhatWasSent(t *testing.T) {
	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	nc := connect(t, ns)
	a := newFeed("md.AAPL", "engine-1", 3, 1500)
	b := newFeed("md.MSFT", "engine-2", 4, 40000)
	b.totals.Tail = 9 // as a closing subscriber's last message says
	a.totals.TailUnknown = true
	for range 4 {
		a.interval(t, nc, 2000, 2, 1)
		b.interval(t, nc, 1000, 0, 0)
	}
	waitIntervals(t, s.URL(), map[string]uint64{"md.AAPL/engine-1": 4, "md.MSFT/engine-2": 4})

	body := httpGet(t, s.URL()+"metrics")
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "%s", body)
	for name := range fams {
		assert.True(t, strings.HasPrefix(name, "tickbus_"), name)
	}
	find := func(name, topic, sub string) float64 {
		t.Helper()
		fam := fams[name]
		require.NotNil(t, fam, name)
		for _, m := range fam.Metric {
			lbl := map[string]string{}
			for _, l := range m.Label {
				lbl[l.GetName()] = l.GetValue()
			}
			if lbl["topic"] == topic && lbl["subscriber"] == sub {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
		t.Fatalf("%s{topic=%q,subscriber=%q} not found", name, topic, sub)
		return 0
	}
	for _, f := range []*feed{a, b} {
		tp, sb := f.meta.Topic, f.meta.Subscriber
		assert.Equal(t, float64(f.totals.Received), find("tickbus_ticks_received_total", tp, sb))
		assert.Equal(t, float64(f.totals.Gaps), find("tickbus_gaps_total", tp, sb))
		assert.Equal(t, float64(f.totals.Overruns), find("tickbus_overruns_total", tp, sb))
		assert.Equal(t, float64(f.totals.Tail), find("tickbus_tail_total", tp, sb))
		unknown := 0.0
		if f.totals.TailUnknown {
			unknown = 1
		}
		assert.Equal(t, unknown, find("tickbus_tail_unknown", tp, sb))
		assert.Equal(t, float64(f.merged.TotalCount()), find("tickbus_latency_seconds", tp, sb))
		assert.InDelta(t, f.lastMsg.Rate, find("tickbus_tick_rate", tp, sb), 1e-9)
	}
	// The histogram's buckets agree with the HdrHistogram sent, to its
	// 3-digit resolution.
	for _, m := range fams["tickbus_latency_seconds"].Metric {
		f := a
		for _, l := range m.Label {
			if l.GetName() == "subscriber" && l.GetValue() == b.meta.Subscriber {
				f = b
			}
		}
		for _, bk := range m.Histogram.Bucket {
			if math.IsInf(bk.GetUpperBound(), 1) {
				assert.Equal(t, uint64(f.merged.TotalCount()), bk.GetCumulativeCount())
				continue
			}
			bound := int64(bk.GetUpperBound() * 1e9)
			var want int64
			for _, bar := range f.merged.Distribution() {
				if bar.To <= bound {
					want += bar.Count
				}
			}
			assert.Equal(t, want, int64(bk.GetCumulativeCount()), "bucket le=%g", bk.GetUpperBound())
		}
	}
	require.NotNil(t, fams["tickbus_dash_messages_total"])
	assert.Equal(t, 8.0, fams["tickbus_dash_messages_total"].Metric[0].Counter.GetValue())
	require.NotNil(t, fams["tickbus_latency_interval_seconds"])
	for _, m := range fams["tickbus_latency_interval_seconds"].Metric {
		f := a
		for _, l := range m.Label {
			if l.GetName() == "subscriber" && l.GetValue() == b.meta.Subscriber {
				f = b
			}
		}
		assert.Equal(t, uint64(f.last().TotalCount()), m.Summary.GetSampleCount())
		for _, q := range m.Summary.Quantile {
			if q.GetQuantile() == 0.99 {
				assert.InDelta(t, float64(f.last().ValueAtQuantile(99))/1e9, q.GetValue(), 1e-12)
			}
		}
	}
}

func TestServer_BadMessages_LoggedOnceIgnoredAndServing(t *testing.T) {
	ns := startNATS(t)
	var logs syncBuffer
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}, Logger: zerolog.New(&logs), MaxSeries: 3})
	nc := connect(t, ns)
	subj := stats.Subject("", "t", "s")

	good := newFeed("t", "s", 5, 1000)
	good.interval(t, nc, 100, 0, 0)
	valid, err := stats.Encode(good.lastMsg)
	require.NoError(t, err)
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(valid, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	bad := map[string][]byte{
		reasonMalformed:  []byte("\xff\x00 not json"),
		reasonVersion:    edit(func(m map[string]any) { m["v"] = 99 }),
		reasonInvalid:    edit(func(m map[string]any) { m["received"] = 1e18 }),
		reasonHistogram:  edit(func(m map[string]any) { m["hist"] = "HISTFAAAA" }),
		reasonOutOfOrder: valid, // the same interval again
	}
	flood := 2000
	if testing.Short() {
		flood = 300 // the race detector makes each decode far slower
	}
	for i := 0; i < flood; i++ {
		for _, b := range bad {
			require.NoError(t, nc.Publish(subj, b))
		}
	}
	// More series than the limit.
	for _, sub := range []string{"s2", "s3", "s4", "s5"} {
		f := newFeed("t", sub, 6, 1000)
		f.interval(t, nc, 10, 0, 0)
	}
	require.NoError(t, nc.Flush())
	good.interval(t, nc, 100, 0, 0)

	st := waitIntervals(t, s.URL(), map[string]uint64{"t/s": 2})
	assert.Len(t, st.Series, 3, "the series limit holds")
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, rej := s.store.counts()
		done := rej[reasonSeries] >= 2
		for r := range bad {
			done = done && rej[r] >= uint64(flood)
		}
		if done || time.Now().After(deadline) {
			for r := range bad {
				assert.Equal(t, uint64(flood), rej[r], r)
			}
			assert.Equal(t, uint64(2), rej[reasonSeries])
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One log line per kind, not one per message.
	for r := range bad {
		assert.Equal(t, 1, strings.Count(logs.String(), `"reason":"`+r+`"`), "reason %s logged once:\n%s", r, logs.String())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), `"reason":"`+reasonSeries+`"`))
	// Still serving.
	assert.Contains(t, string(httpGet(t, s.URL())), "tickbus")
	assert.Contains(t, string(httpGet(t, s.URL()+"metrics")), fmt.Sprintf(`tickbus_dash_rejected_total{reason="malformed"} %d`, flood))
}

func TestServer_Events_StreamsUpdates(t *testing.T) {
	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	nc := connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	f := newFeed("fx.EURUSD", "algo", 9, 3000)
	got := make(chan SeriesView, 4)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "series":
				var v SeriesView
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v) == nil {
					got <- v
				}
			}
		}
		close(got)
	}()
	time.Sleep(100 * time.Millisecond) // the stream is joined once headers are out
	f.interval(t, nc, 777, 0, 0)
	select {
	case v, ok := <-got:
		require.True(t, ok, "stream ended")
		assert.Equal(t, "fx.EURUSD/algo", v.Key)
		assert.Equal(t, int64(777), v.Last.Count)
		assert.Equal(t, f.last().ValueAtQuantile(99.9), v.Last.P999)
		require.Len(t, v.Points, 1)
		assert.Equal(t, f.last().Max(), v.Points[0].Max)
	case <-ctx.Done():
		t.Fatal("no event")
	}
}

func TestServer_Close_IsIdempotentAndStopsServing(t *testing.T) {
	ns := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := tickbus.Connect(ctx, tickbus.WithNATS(ns.ClientURL()))
	require.NoError(t, err)
	defer cl.Close()
	s := startDash(t, Config{Client: cl})
	httpGet(t, s.URL())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = http.Get(s.URL())
	assert.Error(t, err)
	select {
	case <-cl.Done():
		t.Fatal("a client passed in is not closed")
	default:
	}
	w, err := cl.WatchStats("", func(string, []byte) {})
	require.NoError(t, err, "a client passed in stays usable")
	require.NoError(t, w.Stop())
}

func TestServe_ReturnsWhenContextEnds(t *testing.T) {
	ns := startNATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, Config{NATS: NATSConfig{URL: ns.ClientURL()}, Listen: "127.0.0.1:0"}) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestStart_RejectsBadConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Start(ctx, Config{History: -time.Second})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = Start(ctx, Config{NATS: NATSConfig{Token: "x", User: "u"}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = Start(ctx, Config{NATS: NATSConfig{TLSCert: "c"}})
	assert.ErrorIs(t, err, ErrConfig)
	_, err = Start(ctx, Config{Listen: "256.0.0.1:99999"})
	assert.Error(t, err)
	// No NATS there: a clear error, nothing left listening.
	_, err = Start(ctx, Config{Listen: "127.0.0.1:0", NATS: NATSConfig{URL: "nats://127.0.0.1:1", ConnectTimeout: time.Second}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connect to NATS")
	assert.False(t, errors.Is(err, ErrConfig))
}

// Messages that land faster than a client reads are coalesced into fewer
// events, but every interval's point reaches the client.
func TestServer_Events_CoalesceWithoutLosingPoints(t *testing.T) {
	ns := startNATS(t)
	s := startDash(t, Config{NATS: NATSConfig{URL: ns.ClientURL()}})
	nc := connect(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	time.Sleep(100 * time.Millisecond)

	f := newFeed("t", "s", 41, 1000)
	const n = 30
	for range n {
		f.interval(t, nc, 10, 0, 0)
	}
	seen := map[int64]bool{}
	events := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(seen) < n && sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var v SeriesView
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v))
		events++
		for _, p := range v.Points {
			assert.False(t, seen[p.T], "point %d sent twice", p.T)
			seen[p.T] = true
		}
	}
	assert.Len(t, seen, n, "every interval's point arrived")
	t.Logf("%d intervals arrived in %d events", n, events)
}
