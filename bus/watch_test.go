package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// How soon after a home record is written a node whose watcher was made
// deaf must have it, through a watcher (its backstop re-read is off).
// nats.go alone recovers such a watcher only at its heartbeat check, every
// 10 s: after a restart these tests arrange that check to come more than
// restartBound after the record, and a deleted consumer is found no
// sooner than 5 s after its last heartbeat. The node's own recovery takes
// a reconnect, or two probes (200 ms apart here).
const (
	restartBound = 6 * time.Second
	deletedBound = 4 * time.Second
	testProbe    = 200 * time.Millisecond
)

// jsServer is an in-process nats-server with JetStream on a fixed port and
// store directory, so that a test can stop it and start it again with its
// streams (as nats-server -sd does).
type jsServer struct {
	t    *testing.T
	port int
	dir  string
	srv  *server.Server
}

func startJS(t *testing.T) *jsServer {
	s := &jsServer{t: t, port: freePort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *jsServer) start() {
	s.t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: s.port, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: s.dir, ServerName: "watch-test"})
	require.NoError(s.t, err)
	go srv.Start()
	require.True(s.t, srv.ReadyForConnections(20*time.Second), "nats-server not ready")
	s.srv = srv
}

func (s *jsServer) stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

func (s *jsServer) url() string { return "nats://127.0.0.1:" + itoa(s.port) }

// watchConfig: quick reconnects, and nothing but its watchers tells the
// node of a record (SetRecordBackstop 0, after Open).
func watchConfig(id, url string) bus.Config {
	c := testConfig(id, url)
	c.NATS.ReconnectWait = 20 * time.Millisecond
	c.NATS.ReconnectMax = 200 * time.Millisecond
	return c
}

// homesOf subscribes s on topic at n and returns the homes its OnHome is
// told of.
func homesOf(t *testing.T, n *bus.Node, topic string) <-chan bus.HomeInfo {
	t.Helper()
	homes := make(chan bus.HomeInfo, 256)
	spec := subSpec(topic, "s", &recorder{})
	spec.OnHome = func(h bus.HomeInfo) {
		select {
		case homes <- h:
		default:
		}
	}
	_, err := n.Subscribe(context.Background(), spec)
	require.NoError(t, err)
	return homes
}

// waitHome returns the first home of node id told within d.
func waitHome(t *testing.T, homes <-chan bus.HomeInfo, id string, d time.Duration) (bus.HomeInfo, bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case h := <-homes:
			if h.Node.ID == id {
				return h, true
			}
		case <-deadline:
			return bus.HomeInfo{}, false
		}
	}
}

// A NATS restart loses the watchers' consumers. The node starts new
// watchers when it reconnects, so a record written after the restart
// reaches a subscriber through its watcher, not a re-read.
func TestWatch_NATSRestart_WatcherDeliversTheNextRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a nats-server and waits for nats.go's heartbeat check (up to 10 s); skipped with -short")
	}
	ctx := context.Background()
	js := startJS(t)
	var logs logBuf
	ca := watchConfig("a", js.url())
	ca.Logger = loggerTo(&logs)
	a := openNode(t, ca)
	bus.SetRecordBackstop(a, 0)
	homes := homesOf(t, a, "w")
	b := openNode(t, watchConfig("b", js.url()))
	pb, err := b.Publish(ctx, pubSpec("w", &recorder{}))
	require.NoError(t, err)
	first, ok := waitHome(t, homes, "b", eventually)
	require.True(t, ok, "a heard b's home")

	js.stop()
	require.Eventually(t, func() bool { return !a.Connected() && !b.Connected() }, eventually, tick)
	// nats.go checks its consumers' heartbeats every 10 s and, while
	// disconnected, reports them as not active. Restarting right after
	// such a check puts its next one (which could recreate the consumer
	// without this node's help) 10 s away, past restartBound.
	deadline := time.Now().Add(15 * time.Second)
	for logs.count("consumer not active") == 0 && time.Now().Before(deadline) {
		time.Sleep(tick)
	}
	js.start()
	require.Eventually(t, func() bool { return a.Connected() && b.Connected() }, eventually, tick)
	require.NoError(t, pb.Close()) // deletes the lease: c takes it at once

	c := openNode(t, watchConfig("c", js.url()))
	_, err = c.Publish(ctx, pubSpec("w", &recorder{}))
	require.NoError(t, err)
	written := time.Now()
	h, ok := waitHome(t, homes, "c", restartBound)
	t.Logf("a heard the record %v after it was written", time.Since(written))
	require.True(t, ok, "a heard c's home within %v of its record, through its watcher\n%s", restartBound, logs.String())
	assert.Greater(t, h.Epoch, first.Epoch)
	// the leases' watcher may still be making its bucket again (the
	// restarted server lost that memory stream)
	assert.Eventually(t, func() bool { return a.Stats().WatcherRestarts >= 2 }, eventually, tick,
		"both watchers restarted after the reconnect\n%s", logs.String())
}

// A watcher whose consumer is deleted on the server while the node stays
// connected hears nothing more; nats.go notices at a heartbeat check 10 to
// 20 s later. The node's probe finds the watcher behind its bucket and
// starts another.
func TestWatch_ConsumerDeletedOnTheServer_ProbeRestartsTheWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the watcher probe; skipped with -short")
	}
	ctx := context.Background()
	js := startJS(t)
	var logs logBuf
	ca := watchConfig("a", js.url())
	ca.Logger = loggerTo(&logs)
	a := openNode(t, ca)
	bus.SetRecordBackstop(a, 0)
	bus.SetWatchProbe(a, testProbe)
	homes := homesOf(t, a, "w")
	c := openNode(t, watchConfig("c", js.url())) // before the deletion: its Publish starts its own watchers

	nc, err := nats.Connect(js.url())
	require.NoError(t, err)
	defer nc.Close()
	jsc, err := jetstream.New(nc)
	require.NoError(t, err)
	var streams []jetstream.Stream
	require.Eventually(t, func() bool { // a's two watchers are up
		streams = streams[:0]
		for _, name := range []string{"KV_tickbus_homes", "KV_tickbus_seqs"} {
			s, err := jsc.Stream(ctx, name)
			if err != nil {
				return false
			}
			if info, err := s.Info(ctx); err != nil || info.State.Consumers == 0 {
				return false
			}
			streams = append(streams, s)
		}
		return true
	}, eventually, tick)
	for _, s := range streams {
		for name := range s.ConsumerNames(ctx).Name() {
			// one may be gone already: a's probe may have replaced a
			// watcher it found slow (a loaded machine)
			if err := s.DeleteConsumer(ctx, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				require.NoError(t, err)
			}
		}
	}

	_, err = c.Publish(ctx, pubSpec("w", &recorder{}))
	require.NoError(t, err)
	written := time.Now()
	_, ok := waitHome(t, homes, "c", deletedBound)
	t.Logf("a heard the record %v after it was written", time.Since(written))
	require.True(t, ok, "a heard c's home within %v of its record, through a new watcher\n%s", deletedBound, logs.String())
	assert.Positive(t, logs.count("home watcher restarted", "deaf"), "the probe found the watcher deaf")
	assert.Zero(t, a.Stats().Reconnects, "no reconnect helped")
}
