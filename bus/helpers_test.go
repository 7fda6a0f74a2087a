package bus_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/rdma"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

// fast timings keep tests short; still generous against a loaded machine
// (hbTimeout: under -race with every package at once on two cores, 1 s aged
// live peers out again and again; tests of peer loss wait for the event).
const (
	hbInterval = 50 * time.Millisecond
	hbTimeout  = 3 * time.Second
	eventually = 10 * time.Second
	tick       = 10 * time.Millisecond
)

// logBuf is a goroutine-safe buffer for a zerolog logger.
type logBuf struct{ testlog.Buf }

// count returns how many log lines contain every one of subs.
func (l *logBuf) count(subs ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			n++
		}
	}
	return n
}

// leaseTTL: long enough that a home's renewals survive the race detector
// slowing the embedded JetStream on a loaded machine (CI: every package at
// once on two cores, where 3 s was not enough; a lost lease is the
// correct reaction to slow renewals, and would fail tests that are about
// something else); tests of lease expiry set their own.
const leaseTTL = 10 * time.Second

func testConfig(id, url string) bus.Config {
	c := bus.Config{
		NodeID:            id,
		HostID:            "host-" + id,
		HeartbeatInterval: hbInterval,
		HeartbeatTimeout:  hbTimeout,
		RequestTimeout:    time.Second,
		LeaseTTL:          leaseTTL,
	}
	if url != "" {
		c.NATS.URLs = []string{url}
	}
	return c
}

func openNode(t *testing.T, cfg bus.Config) *bus.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := bus.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func loggerTo(w *logBuf) *zerolog.Logger {
	l := zerolog.New(w)
	return &l
}

func peerIDs(n *bus.Node) []string {
	var ids []string
	for _, p := range n.Peers() {
		ids = append(ids, p.ID)
	}
	return ids
}

// sampleEndpoint is a well-formed endpoint for a queue pair of the given
// provider; the bus only carries it.
func sampleEndpoint(provider, host string, qpn uint32) rdma.Endpoint {
	return rdma.Endpoint{Provider: provider, HostID: host, QPN: qpn, Nonce: uint64(qpn) * 7919, Addr: "127.0.0.1:1"}
}

// recorder collects callback events for assertions.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e == s {
			n++
		}
	}
	return n
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// pubSpec is a publish spec that records what it is told and makes a home
// descriptor naming the node.
func pubSpec(topic string, rec *recorder) bus.PublishSpec {
	return bus.PublishSpec{
		Topic: topic,
		NewHome: func(_ context.Context, topic string, _ uint64) ([]byte, error) {
			return []byte("home-of-" + topic), nil
		},
		AcceptHome: func(_ context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
			return bus.ConnectReply{Endpoint: sampleEndpoint(req.Endpoint.Provider, "home", 1), Region: []byte("seq-region")}, nil
		},
		OnSubscriber:     func(s bus.SubscriberInfo) { rec.add("sub+" + s.Key()) },
		OnSubscriberGone: func(s bus.SubscriberInfo, err error) { rec.add("sub-" + s.Key()) },
		OnHomeLost:       func(h bus.HomeInfo, err error) { rec.add("homelost " + h.Node.ID) },
	}
}

func subSpec(topic, id string, rec *recorder) bus.SubscribeSpec {
	return bus.SubscribeSpec{
		Topic: topic,
		ID:    id,
		Ring:  []byte("ring-" + id),
		Accept: func(_ context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
			return bus.ConnectReply{Endpoint: sampleEndpoint(req.Endpoint.Provider, "sub", 2), Region: []byte("ring-region-" + id)}, nil
		},
		OnPublisher:     func(p bus.PublisherInfo) { rec.add("pub+" + p.Key()) },
		OnPublisherGone: func(p bus.PublisherInfo, err error) { rec.add("pub-" + p.Key()) },
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func itoa(i int) string { return strconv.Itoa(i) }
