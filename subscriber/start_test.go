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
	"github.com/tickbus/tickbus/tick"
)

// A ring joining a running topic delivers nothing while a publisher's
// connect is still learning the start (learnStart in flight): it waits at
// 1 until then, and polling meanwhile would recover the topic's earlier
// ticks from the journal, or name them a gap, and join at 1 (the CLI's
// cluster test saw its late subscriber join at 1 when a second publisher
// connected before the poller had moved the ring to the start the first
// one taught it). Once no start is being learnt, the ring starts at the
// home's counter and delivers from there, nothing counted lost.
func TestJoin_WhileAStartIsLearnt_DeliversNothingThenStartsAtTheCounter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := testlog.OnFailure(t)
	node, err := bus.Open(ctx, bus.Config{NodeID: "learn", LeaseTTL: 10 * time.Second, Logger: log})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "learn", Idle: rdma.Yield{}, Timeout: 10 * time.Second, Logger: *log})
	require.NoError(t, err)
	defer pub.Close()
	payload := make([]byte, tick.Size)
	for range 100 { // before the subscriber: in the journal only
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	var h countTicks
	sub, err := New(ctx, node, devs, Config{Topic: "learn", Slots: 1024, StatsInterval: -1, GapTimeout: 10 * time.Millisecond, Logger: *log}, &h)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.journalAt.Load() != 0 }, 10*time.Second, time.Millisecond, "the journal is attached")
	require.Equal(t, uint64(101), sub.startAt.Load(), "the connect learnt the home's counter")

	sub.accepting.Add(1) // another publisher's connect, learning the start
	for range 10 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		sub.Poll()
	}
	assert.Zero(t, h.n, "nothing delivered while a start is being learnt")
	sub.accepting.Add(-1)
	require.Eventually(t, func() bool { sub.Poll(); return h.n >= 10 }, 10*time.Second, time.Millisecond)
	for range 1000 {
		sub.Poll()
	}
	c := sub.Counters()
	assert.Equal(t, uint64(101), c.JoinedAt, "joined at the counter it learnt")
	assert.Equal(t, uint64(10), c.Received)
	assert.Zero(t, c.BeforeJoin, "nothing passed over: the ring started where the publisher began writing into it")
	assert.Zero(t, c.Lost())
}
