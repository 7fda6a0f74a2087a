package subscriber

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

type countTicks struct{ n int }

func (h *countTicks) OnTicks(t []ring.Tick) { h.n += len(t) }
func (h *countTicks) OnEvent(ring.Event)    {}

// A reliable subscriber's credit writes land: its credit queue pair is
// granted its own cell at the publisher, and not one write fails. (Since
// queue pairs were confined, the publisher's end was granted nothing, every
// credit write failed on its first post, and the READ fallback hid it.)
// The lease is long: under CI's load the lease loop stalled 0.6-2 s, the
// home gave itself up, and the new epoch's first sequence was a whole
// reservation past the subscriber, which had to poll for its gap timeout
// before it could make room, while the test polls only between publishes:
// a failover, not this test. A publish here fails only if credits do.
func TestReliable_CreditWritesLand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := testlog.OnFailure(t)
	node, err := bus.Open(ctx, bus.Config{NodeID: "credit", LeaseTTL: 10 * time.Second, Logger: log})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var h countTicks
	sub, err := New(ctx, node, devs, Config{Topic: "credit", Mode: ring.Reliable, Slots: 64, StatsInterval: -1, Logger: *log}, &h)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "credit", Idle: rdma.Yield{}, Timeout: 10 * time.Second, Logger: *log})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.Counters().Credits == 1 }, 10*time.Second, 5*time.Millisecond)
	epoch := pub.Epoch()
	const n = 1000 // 15 laps of the ring
	for i := 0; i < n; i++ {
		_, err := pub.Publish(tick.MessageType, []byte("reliable"), time.Now().UnixNano())
		require.NoError(t, err, "publish %d (the subscriber polled after each): epoch %d then %d, failovers %v, writer %+v, subscriber %+v",
			i, epoch, pub.Epoch(), pub.Failovers(), pub.Stats(), sub.Counters())
		sub.Poll()
	}
	for h.n < n {
		sub.Poll()
	}
	for i := 0; i < 100; i++ { // the idle path writes the final position and reaps
		sub.Poll()
	}
	st := sub.reader.Stats()
	assert.Equal(t, uint64(n), st.Delivered)
	assert.Zero(t, st.CreditErrors, "credit writes that failed")
}
