package rdma_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func TestParseIdle_NamesAndErrors(t *testing.T) {
	for _, name := range []string{"spin", "yield", "backoff"} {
		s, err := rdma.ParseIdle(name)
		require.NoError(t, err, name)
		s.Idle(0)
		s.Idle(1)
	}
	_, err := rdma.ParseIdle("nap")
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `"nap"`)
}

func TestBackoff_ParksAfterSpinsAndYields(t *testing.T) {
	b := &rdma.Backoff{MaxSpins: 2, MaxYields: 2, MinPark: time.Millisecond, MaxPark: 2 * time.Millisecond}
	start := time.Now()
	for i := 0; i < 4; i++ {
		b.Idle(0) // spins and yields: no sleep
	}
	b.Idle(0) // first park
	// Sleeping at least MinPark is a lower bound the runtime guarantees, not a
	// timing assertion about speed.
	assert.GreaterOrEqual(t, time.Since(start), time.Millisecond)
}
