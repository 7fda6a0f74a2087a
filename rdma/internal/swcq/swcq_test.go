package swcq_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/swcq"
)

func TestCQ_PushPoll_OrderAndFull(t *testing.T) {
	q, err := swcq.New(3)
	require.NoError(t, err)
	require.Equal(t, 4, q.Cap())
	for i := 0; i < 4; i++ {
		require.True(t, q.Push(rdma.Completion{ID: uint64(i)}))
	}
	assert.False(t, q.Push(rdma.Completion{ID: 99}))
	assert.Equal(t, uint64(1), q.Overflows.Load())
	buf := make([]rdma.Completion, 3)
	require.Equal(t, 3, q.Poll(buf))
	assert.Equal(t, []uint64{0, 1, 2}, []uint64{buf[0].ID, buf[1].ID, buf[2].ID})
	require.Equal(t, 1, q.Poll(buf))
	assert.Equal(t, uint64(3), buf[0].ID)
	assert.Equal(t, 0, q.Poll(buf))
}

func TestCQ_New_RejectsBadDepth(t *testing.T) {
	_, err := swcq.New(0)
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
}

// Many producers, one consumer: every completion arrives once, and each
// producer's completions arrive in its order.
func TestCQ_ManyProducers_EveryCompletionOnceInProducerOrder(t *testing.T) {
	const producers, each = 4, 20000
	q, err := swcq.New(64)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; {
				if q.Push(rdma.Completion{QPN: uint32(p), ID: uint64(i)}) {
					i++
				}
			}
		}(p)
	}
	next := make([]uint64, producers)
	buf := make([]rdma.Completion, 16)
	for got := 0; got < producers*each; {
		n := q.Poll(buf)
		for _, c := range buf[:n] {
			require.Equal(t, next[c.QPN], c.ID, "producer %d out of order", c.QPN)
			next[c.QPN]++
		}
		got += n
	}
	wg.Wait()
	assert.Equal(t, 0, q.Poll(buf))
}

func BenchmarkCQ_PushPoll(b *testing.B) {
	q, _ := swcq.New(64)
	buf := make([]rdma.Completion, 1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Push(rdma.Completion{ID: uint64(i)})
		q.Poll(buf)
	}
}
