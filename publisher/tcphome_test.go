package publisher_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// A topic on tcp whose home is its publisher, in its own process: the
// publisher claims with CPU atomics on its own counter (tcp's loopback
// pair maps it), and only the ring writes go through tcp.
func TestPublisher_TCPHome_ClaimsLocallyRingWritesOverTCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "n-tcphome", Provider: rdma.ProviderTCP})
	require.NoError(t, err)
	t.Cleanup(func() { node.Close() })
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	t.Cleanup(func() { devs.Close() })
	h := &seqs{}
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "th", Provider: rdma.ProviderTCP, StatsInterval: -1,
		DrainQuiet: 20 * time.Millisecond}, h)
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	p, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "th", Provider: rdma.ProviderTCP, Idle: rdma.Yield{}})
	require.NoError(t, err)
	defer p.Close()
	require.True(t, p.IsHome())
	require.NoError(t, p.WaitSubscribers(ctx, 1))

	payload := make([]byte, tick.Size)
	const n = 300
	for i := 0; i < n; i++ {
		_, err := p.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for sub.Poll() > 0 {
		}
		return len(h.got) == n
	}, 10*time.Second, time.Millisecond)
	for i, s := range h.got {
		require.Equal(t, uint64(i+1), s)
	}
	st := p.Stats()
	assert.True(t, st.DirectClaim, "claims on the home in this process are CPU atomics, not tcp round trips")
	assert.Equal(t, 1, st.Targets)
	assert.Zero(t, st.Direct, "the subscriber's ring is written through tcp (its QP is confined to its grants)")
	assert.Equal(t, "tcp", sub.Providers())
}
