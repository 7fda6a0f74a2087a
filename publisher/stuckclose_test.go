package publisher_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// A publish on another goroutine that has not returned within closeWait
// (stuck past every timeout of its own): Close stops waiting for it,
// withdraws the publisher from the bus (its home goes, and another
// publisher takes the topic), leaves the writer's memory mapped and says
// so in its error. The stuck publish, returning late, touches that memory
// without a fault; later publishes are refused.
func TestPublisher_Close_APublishStuckPastItsTimeouts_WithdrawsAndLeavesTheMemoryMapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t, ctx, "stuck")
	cfg := publisher.Config{Topic: "stuck", ID: "p", Idle: rdma.Yield{},
		Timeout: 100 * time.Millisecond, FailoverTimeout: 100 * time.Millisecond, ConnectTimeout: 100 * time.Millisecond}
	p, err := publisher.New(ctx, r.node, r.devs, cfg)
	require.NoError(t, err)
	require.NoError(t, p.WaitSubscribers(ctx, 1))
	require.True(t, p.IsHome())
	payload := make([]byte, tick.Size)
	for range 5 {
		_, err := p.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}

	release := publisher.HoldPublish(p)
	err = p.Close()
	require.Error(t, err, "Close returned as if the stuck publish had ended")
	assert.Contains(t, err.Error(), "did not return within 1.4s")
	assert.Contains(t, err.Error(), "left open")

	cfg.ID = "q"
	q, err := publisher.New(ctx, r.node, r.devs, cfg)
	require.NoError(t, err)
	defer q.Close()
	require.Eventually(t, func() bool { return q.IsHome() }, 10*time.Second, 10*time.Millisecond,
		"the stuck publisher was not withdrawn: its home stayed")

	require.NoError(t, release(), "the writer's memory went under the stuck publish")
	_, err = p.Publish(tick.MessageType, payload, time.Now().UnixNano())
	assert.ErrorIs(t, err, ring.ErrClosed)
	r.drain()
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, r.h.got)
}
