package subscriber

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/ring"
)

// A home's answer, asked at Close with no home record heard (ForgetHome,
// or a watcher that was away), must be a bound the reader believes: the
// answer {counter 501, start 1} once gave the reader the bound 1, which
// is its "awaiting the first epoch" mark, so the counter was not believed
// and Close named no tail, silently (TestPubSub_DroppedSubscriber_
// NoHomeRecordYet_StillNamesTheTailAtClose failed about one run in ten).
// No sequence at or above the counter was handed out, so it is the bound.
func TestSetCounter_AnswerWithNoRecordHeard_IsABoundTheReaderBelieves(t *testing.T) {
	dev, err := shm.Open(shm.Config{HostID: "setcounter"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	cq, err := dev.CreateCQ(16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cq.Close() })
	rg, err := ring.NewRing(dev, ring.RingConfig{Slots: 1024, SlotSize: 96, Mode: ring.Lossy, CQ: cq})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rg.Close() })
	s := &Subscriber{reader: rg.Reader()}
	s.h.joinedAt.Store(1) // the ring delivered its first tick
	require.True(t, s.setCounter(homeCounter{Next: 501, Start: 1}))
	next, epoch, end := s.reader.ClaimedTail()
	assert.Equal(t, uint64(1), next)
	assert.Zero(t, epoch, "the epoch's start is the reader's position: nothing of an ended epoch to split off")
	assert.Equal(t, uint64(501), end, "the home's counter was not believed: Close would name no tail")
}
