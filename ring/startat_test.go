package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReader_StartAt_MovesAFreshReaderOnlyForward(t *testing.T) {
	mem := make([]byte, regionSize(8, 128))
	r := newReader(mem, &RingConfig{Slots: 8, SlotSize: 128, Mode: Lossy, Start: 5, MaxBatch: 4})
	assert.ErrorIs(t, r.StartAt(0), ErrInvalidConfig)
	assert.ErrorIs(t, r.StartAt(4), ErrInvalidConfig, "never backwards")
	require.NoError(t, r.StartAt(100))
	assert.Equal(t, uint64(100), r.Next())
	assert.Equal(t, uint64(100), r.Head())
	r.stats.delivered.Add(1)
	assert.ErrorIs(t, r.StartAt(200), ErrInvalidConfig, "not after the reader passed something")
	assert.Equal(t, uint64(100), r.Next())
}
