package bus_test

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// gateLog is a node's log that holds the first line containing hold until
// open is called: the node's discovery handler, which logs an ignored
// message inline, stops there while the rest of the node runs on.
type gateLog struct {
	hold    string
	logBuf  // every line
	once    sync.Once
	holding chan struct{} // closed when the handler is held
	gate    chan struct{}
}

func newGateLog(hold string) *gateLog {
	return &gateLog{hold: hold, holding: make(chan struct{}), gate: make(chan struct{})}
}

func (g *gateLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(g.hold)) {
		g.once.Do(func() {
			close(g.holding)
			<-g.gate
		})
	}
	return g.logBuf.Write(p)
}

func (g *gateLog) open() { close(g.gate) }

// A node that runs but reads its discovery messages slower than they come
// (held here inside its handler; a starved host, or the race detector's
// slow signature checks, alike) keeps the peers whose heartbeats wait
// unread in its queue: ageing counts only time it kept up. (It used to
// drop them after the timeout, though they had never stopped beating, and
// their queue pairs with them; the churn test saw live peers go and come
// back.) When it has caught up the peer is still there, never reported
// down.
func TestNode_BehindOnDiscovery_KeepsPeersWhoseHeartbeatsWaitUnread(t *testing.T) {
	log := newGateLog("bus: ignored bad message")
	cfg := testConfig("reader", "")
	// the reader ticks fast (its ticks count the hold); the beater beats at
	// the product's rate, which a reader under -race on a loaded host
	// catches up with once released
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 50*time.Millisecond, time.Second
	zl := zerolog.New(log)
	cfg.Logger = &zl
	var mu sync.Mutex
	var downs []string
	cfg.OnPeerDown = func(p bus.PeerInfo, err error) {
		mu.Lock()
		downs = append(downs, p.ID+": "+err.Error())
		mu.Unlock()
	}
	reader := openNode(t, cfg)
	bcfg := testConfig("beater", reader.ClientURL())
	bcfg.HeartbeatInterval = bus.DefaultHeartbeatInterval
	openNode(t, bcfg)
	require.Eventually(t, func() bool { return slices.Contains(peerIDs(reader), "beater") }, eventually, tick)

	// an unsigned heartbeat: the reader ignores it and logs that, and its
	// handler is held there
	nc, err := nats.Connect(reader.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Publish(bus.DefaultPrefix+".d.hb", []byte(`{"v":1,"kind":"hb","node":{"id":"x","host":"h","inc":1}}`)))
	require.NoError(t, nc.Flush())
	select {
	case <-log.holding:
	case <-time.After(eventually):
		t.Fatal("the reader's handler never logged the ignored message")
	}
	// held for three heartbeat timeouts of the reader's own ticks (each
	// tick is one heartbeat sent), while the beater's heartbeats pile up
	start := reader.Stats().HeartbeatsSent
	require.Eventually(t, func() bool { return reader.Stats().HeartbeatsSent >= start+60 }, 60*time.Second, tick)
	log.open()

	// caught up: every heartbeat of the beater read
	require.Eventually(t, func() bool {
		return bytes.Contains([]byte(bus.DiscoveryStateForTest(reader, "")), []byte(": 0 discovery messages"))
	}, 30*time.Second, tick, "the reader catches up: %s", bus.DiscoveryStateForTest(reader, ""))
	assert.Contains(t, peerIDs(reader), "beater")
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, downs, "a peer that kept beating was reported down; log:\n%s", log.lines("bus: peer", "behind", "did not run"))
	assert.Equal(t, 1, log.count("behind on discovery messages"), "the reader said it was behind (once: rate-limited)")
}
