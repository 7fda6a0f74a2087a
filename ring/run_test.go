package ring

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

type countHandler struct{ ticks, events atomic.Uint64 }

func (c *countHandler) OnTicks(ts []Tick) { c.ticks.Add(uint64(len(ts))) }
func (c *countHandler) OnEvent(Event)     { c.events.Add(1) }

func TestReader_Run_PollsUntilContextDone(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1024})
	h := &countHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Reader().Run(ctx, h, rdma.Yield{}) }()
	for i := 0; i < 500; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.ticks.Load() == 500 }, 10*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	assert.Zero(t, h.events.Load())
}

// The default idle strategy parks an idle reader (so an idle subscriber
// costs next to no CPU) and goes back to spinning when ticks come: every
// tick published after it parked is still delivered.
func TestReader_Run_AdaptiveIdleParksWhenIdle(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{})
	r := tp.addRing(RingConfig{Slots: 1024})
	h := &countHandler{}
	idle := rdma.NewAdaptive()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Reader().Run(ctx, h, idle) }()
	require.Eventually(t, func() bool { return idle.Parks() > 0 }, 10*time.Second, time.Millisecond, "idle reader never parked")
	for i := 0; i < 100; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.ticks.Load() == 100 }, 10*time.Second, time.Millisecond)
	n := idle.Parks()
	require.Eventually(t, func() bool { return idle.Parks() > n }, 10*time.Second, time.Millisecond, "reader did not park again after the ticks")
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	assert.Zero(t, h.events.Load())
}
