package ring

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// A lossy batch of 32 is a chain of 65 WRITEs; the target's QP holds 8.
// The writer posts what fits, reaps, posts the rest, and every tick
// arrives whole and in order.
func TestWriter_PublishBatch_ChainLongerThanSendQueueIsPostedInParts(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{MaxBatch: 32, SignalEvery: 4})
	r, err := NewRing(tp.dev, RingConfig{Slots: 1024, Mode: Lossy, CQ: tp.rcq})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	wq, err := tp.dev.CreateQP(rdma.QPConfig{SendCQ: tp.wcq, RecvCQ: tp.wcq, SendDepth: 8})
	require.NoError(t, err)
	rq, err := tp.dev.CreateQP(rdma.QPConfig{SendCQ: tp.rcq, RecvCQ: tp.rcq, SendDepth: 8})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, wq.Connect(ctx, rq.LocalEndpoint()))
	require.NoError(t, rq.Connect(ctx, wq.LocalEndpoint()))
	t.Cleanup(func() { _ = wq.Close(); _ = rq.Close() })
	_, err = tp.w.AddTarget(Target{ID: 1, QP: wq, Ring: r.Desc()})
	require.NoError(t, err)

	batch := make([]Tick, 32)
	const rounds = 10
	for k := range rounds {
		for i := range batch {
			seq := uint64(k*len(batch) + i + 1)
			batch[i] = Tick{Type: 7, Payload: payloadFor(seq, 8+i)}
		}
		_, err := tp.w.PublishBatch(batch)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) >= rounds*len(batch) })
	require.Len(t, c.ticks, rounds*len(batch))
	for i, tk := range c.ticks {
		seq := uint64(i + 1)
		assert.Equal(t, seq, tk.Seq)
		assert.Equal(t, payloadFor(seq, 8+i%len(batch)), tk.Payload, "tick %d", seq)
	}
	assert.Empty(t, c.events, "nothing lost, nothing overrun")
	assert.Zero(t, tp.w.Stats().Dropped)
}
