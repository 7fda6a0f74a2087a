package dash

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/stats"
)

// startNATS runs a real NATS server on a random loopback port for the test.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		t.Fatal("nats server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(t testing.TB, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// feed plays a subscriber: it records real latencies into a stats.Recorder
// and publishes the Reporter's messages, keeping its own copy of every
// interval's histogram to check the dashboard against.
type feed struct {
	meta    stats.Meta
	rec     *stats.Recorder
	rep     *stats.Reporter
	rng     *rand.Rand
	totals  stats.Counters
	sent    []*hdrhistogram.Histogram // what each interval held
	merged  *hdrhistogram.Histogram
	scale   float64
	lastMsg *stats.Message
}

func newFeed(topic, sub string, seed uint64, scale float64) *feed {
	meta := stats.Meta{Topic: topic, Subscriber: sub, Host: "host-" + sub, Provider: "shm"}
	rec := stats.NewRecorder()
	return &feed{meta: meta, rec: rec, rep: stats.NewReporter(meta, rec), rng: rand.New(rand.NewPCG(seed, 7)),
		merged: stats.NewHistogram(), scale: scale}
}

// interval records n latencies and publishes one message.
func (f *feed) interval(t testing.TB, nc *nats.Conn, n int, gaps, overruns uint64) {
	t.Helper()
	own := stats.NewHistogram()
	for range n {
		v := int64(f.scale * (1 + f.rng.ExpFloat64()))
		if f.rng.IntN(500) == 0 {
			v *= 50
		}
		f.rec.Record(v)
		require.NoError(t, own.RecordValue(v))
	}
	f.totals.Received += uint64(n)
	f.totals.Gaps += gaps
	f.totals.Overruns += overruns
	m, err := f.rep.Next(f.totals)
	require.NoError(t, err)
	b, err := stats.Encode(m)
	require.NoError(t, err)
	require.NoError(t, nc.Publish(stats.Subject("", f.meta.Topic, f.meta.Subscriber), b))
	require.NoError(t, nc.Flush())
	f.sent = append(f.sent, own)
	f.merged.Merge(own)
	f.lastMsg = m
	time.Sleep(2 * time.Millisecond) // intervals end at distinct times
}

func (f *feed) last() *hdrhistogram.Histogram { return f.sent[len(f.sent)-1] }

func getState(t testing.TB, url string) State {
	t.Helper()
	resp, err := http.Get(url + "api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st State
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// waitIntervals waits until the dashboard applied want intervals of every
// series named.
func waitIntervals(t testing.TB, url string, want map[string]uint64) State {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := getState(t, url)
		ok := true
		for key, n := range want {
			found := false
			for _, s := range st.Series {
				if s.Key == key && s.Intervals >= n {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard did not get %v in time; state: %+v", want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGet(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return b
}

// syncBuffer is a log sink tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startDash(t testing.TB, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}
