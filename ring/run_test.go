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
