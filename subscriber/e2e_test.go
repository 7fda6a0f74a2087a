package subscriber_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/devices"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

type collect struct {
	mu     sync.Mutex
	seqs   []uint64
	events []ring.Event
	ticks  []tick.Tick
}

func (c *collect) OnTicks(ts []ring.Tick) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		c.seqs = append(c.seqs, t.Seq)
		var tk tick.Tick
		if t.Type == tick.MessageType && tick.Decode(t.Payload, &tk) == nil {
			c.ticks = append(c.ticks, tk)
		}
	}
}

func (c *collect) OnEvent(ev ring.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func TestPubSub_InProcess_DeliversEveryTickInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := bus.Open(ctx, bus.Config{NodeID: "a"})
	require.NoError(t, err)
	defer a.Close()
	b, err := bus.Open(ctx, bus.Config{NodeID: "b", NATS: bus.NATSConfig{URLs: []string{a.ClientURL()}}})
	require.NoError(t, err)
	defer b.Close()
	devA, devB := devices.New(devices.Config{HostID: a.HostID()}), devices.New(devices.Config{HostID: b.HostID()})
	defer devA.Close()
	defer devB.Close()

	var c collect
	sub, err := subscriber.New(ctx, b, devB, subscriber.Config{Topic: "t1", Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()

	pub, err := publisher.New(ctx, a, devA, publisher.Config{Topic: "t1", Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	const n = 2000
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	var tk tick.Tick
	for i := 0; i < n; i++ {
		feed.Next(&tk, time.Now().UnixNano())
		tk.PubTime = time.Now().UnixNano()
		seq, err := pub.PublishTick(&tk)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), seq)
	}
	require.Eventually(t, func() bool { return c.count() == n }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.seqs {
		require.Equal(t, uint64(i+1), s)
	}
	assert.Empty(t, c.events)
	assert.Len(t, c.ticks, n)
	got := sub.Counters()
	assert.Equal(t, uint64(n), got.Received)
	assert.Zero(t, got.Lost())
}
