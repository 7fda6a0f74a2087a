package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A writer whose cached counter is stale must not win a sequence it has no
// room to write: it would hold the claim while waiting for room, and a
// reliable reader would report that sequence as a gap after its gap timeout.
// Here writer b fills the reliable ring; writer a, whose cache still says 1,
// loses its first CAS, learns the counter, finds no room and claims nothing.
func TestWriter_Reliable_StaleCacheClaimsNothingWithoutRoom(t *testing.T) {
	tp := newTopo(t, HomeConfig{}, WriterConfig{Timeout: 50 * time.Millisecond, PublisherID: 1})
	b := tp.addWriter(WriterConfig{Timeout: 50 * time.Millisecond, PublisherID: 2})
	r := tp.addRing(RingConfig{Slots: 8, Mode: Reliable, GapTimeout: time.Hour}, tp.w, b)
	for i := 1; i <= 8; i++ {
		_, err := b.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	require.Equal(t, uint64(9), tp.home.Counter())

	seq, err := tp.w.Publish(0, payloadFor(9, 8), 0)
	require.ErrorIs(t, err, ErrBackPressure)
	assert.Zero(t, seq)
	assert.Equal(t, uint64(9), tp.home.Counter(), "the stale writer claimed nothing")
	assert.Equal(t, uint64(1), tp.w.Stats().BackPressure)

	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 8 })
	seq, err = tp.w.Publish(0, payloadFor(9, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(9), seq)
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 9 })
	assert.Empty(t, c.events, "nothing was lost or skipped")
}
