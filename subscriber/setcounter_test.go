package subscriber

import (
	"testing"

	"github.com/rs/zerolog"

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
	s := joinedOnARing(t)
	require.True(t, s.setCounter(homeCounter{Next: 501, Start: 1}))
	next, epoch, end := s.reader.ClaimedTail()
	assert.Equal(t, uint64(1), next)
	assert.Zero(t, epoch, "the epoch's start is the reader's position: nothing of an ended epoch to split off")
	assert.Equal(t, uint64(501), end, "the home's counter was not believed: Close would name no tail")
}

// A counter the reader holds but does not believe (here past a stale
// reservation a record gave it, and not raised by a home's answer) is not
// the topic's end: Close names nothing it cannot place and says the tail
// is unknown, never closes silent.
func TestNameTail_CounterTheReaderRefuses_IsATailUnknownNotSilence(t *testing.T) {
	s := joinedOnARing(t)
	s.reader.SetEpoch(1, 100) // the last reservation heard
	require.True(t, s.setClaimed(501))
	_, _, end := s.reader.ClaimedTail()
	require.Zero(t, end, "the rig: the reader believed the counter")
	s.nameTail(0, 0)
	assert.Zero(t, s.tail.Load(), "named what it cannot place")
	assert.True(t, s.tailUnknown.Load(), "closed silent: ticks 1..500 may be missing and nothing says so")

	believed := joinedOnARing(t)
	require.True(t, believed.setCounter(homeCounter{Next: 501, Start: 1}))
	believed.nameTail(0, 0)
	assert.Equal(t, uint64(500), believed.tail.Load())
	assert.False(t, believed.tailUnknown.Load(), "a named tail is not unknown")
}

// joinedOnARing is a Subscriber with a 1024-slot shm ring whose first
// tick was delivered, and no handler.
func joinedOnARing(t *testing.T) *Subscriber {
	t.Helper()
	dev, err := shm.Open(shm.Config{HostID: "setcounter"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	cq, err := dev.CreateCQ(16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cq.Close() })
	rg, err := ring.NewRing(dev, ring.RingConfig{Slots: 1024, SlotSize: 96, Mode: ring.Lossy, CQ: cq})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rg.Close() })
	s := &Subscriber{reader: rg.Reader(), log: zerolog.Nop()}
	s.h.joinedAt.Store(1) // the ring delivered its first tick
	s.h.joined = true
	return s
}
