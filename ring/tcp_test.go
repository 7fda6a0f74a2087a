package ring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma/tcp"
)

// The same ring code over the tcp provider, whose completions arrive
// later from another goroutine (the shm provider completes in PostSend):
// claims wait for real, unsignalled writes retire later, send queues fill.
func TestRing_OverTCP_SameProtocol(t *testing.T) {
	dev, err := tcp.Open(tcp.Config{HostID: "test-host"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	tp := newTopoOn(t, dev, HomeConfig{JournalSlots: 64}, WriterConfig{Claim: ClaimFAA, Timeout: 5 * time.Second})
	reliable := tp.addRing(RingConfig{Slots: 64, Mode: Reliable})
	lossy := tp.addRing(RingConfig{Slots: 64, Mode: Lossy})
	n := uint64(2000)
	if testing.Short() {
		n = 500
	}
	var c collector
	for i := uint64(1); i <= n; i++ {
		seq, err := tp.w.Publish(1, payloadFor(i, int(i%90)), int64(i))
		require.NoError(t, err)
		require.Equal(t, i, seq)
		if i%50 == 0 {
			pollUntil(t, reliable.Reader(), &c, func() bool { return reliable.Reader().Next() > i })
		}
	}
	batch := []Tick{{Payload: payloadFor(n+1, 10)}, {Payload: payloadFor(n+2, 10)}, {Payload: payloadFor(n+3, 10)}}
	first, err := tp.w.PublishBatch(batch)
	require.NoError(t, err)
	require.Equal(t, uint64(n+1), first)
	pollUntil(t, reliable.Reader(), &c, func() bool { return reliable.Reader().Next() == n+4 })
	require.Empty(t, c.events)
	for i, tk := range c.ticks[:n] {
		require.Equal(t, payloadFor(uint64(i+1), (i+1)%90), tk.Payload)
	}
	var l collector
	pollUntil(t, lossy.Reader(), &l, func() bool { return lossy.Reader().Next() == n+4 })
	st := lossy.Reader().Stats()
	assert.Equal(t, uint64(n+3), st.Delivered+st.Overrun, "lossy: every sequence delivered or reported")
	assert.Zero(t, st.Gap+st.Corrupt)
	for _, tk := range l.ticks {
		if tk.Seq <= n {
			require.Equal(t, payloadFor(tk.Seq, int(tk.Seq%90)), tk.Payload)
		}
	}
}

// Flush waits for every posted WRITE: over tcp the last unsignalled
// WRITEs are still in flight when Publish returns.
func TestWriter_Flush_WaitsForPostedWrites(t *testing.T) {
	dev, err := tcp.Open(tcp.Config{HostID: "test-host"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	tp := newTopoOn(t, dev, HomeConfig{}, WriterConfig{SignalEvery: 100, Timeout: 5 * time.Second})
	r := tp.addRing(RingConfig{Slots: 256})
	for i := uint64(1); i <= 100; i++ {
		_, err := tp.w.Publish(0, payloadFor(i, 16), 0)
		require.NoError(t, err)
	}
	require.NoError(t, tp.w.Flush())
	// Everything landed: one poll sees all of it, no waiting.
	var c collector
	for r.Reader().Poll(&c) > 0 {
	}
	require.Len(t, c.ticks, 100)
	assert.Empty(t, c.events)
	require.NoError(t, tp.w.Close())
	require.ErrorIs(t, tp.w.Flush(), ErrClosed)
}
