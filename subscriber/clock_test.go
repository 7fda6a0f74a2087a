package subscriber

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWallClock_IsTheWallClock(t *testing.T) {
	var c wallClock
	for range 3 * wallIdleEvery {
		before := time.Now().UnixNano()
		v := c.now()
		after := time.Now().UnixNano()
		// Wide bounds (a preempted test, a step of the wall clock): a
		// monotonic reading or a stale offset would be off by years.
		assert.GreaterOrEqual(t, v, before-int64(100*time.Millisecond))
		assert.LessOrEqual(t, v, after+int64(100*time.Millisecond))
	}
}

func TestWallClock_RefreshesWhenOldAtAReadingOrAnIdleLook(t *testing.T) {
	var c wallClock
	c.now()
	const bogus = 12345 // an offset no refresh gives
	// The last refresh an hour from now: nothing is old until at moves
	// back, however long this test is descheduled.
	young := func() { c.at = nanotime() + int64(time.Hour) }
	c.off = bogus
	young()
	for range 100 {
		c.now()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed at a reading before it was %v old", time.Duration(wallRefresh))
	c.at = nanotime() - wallRefresh
	c.now()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed at a reading %v old", time.Duration(wallRefresh))

	c.off = bogus
	young()
	for range 3 * wallIdleEvery {
		c.idled()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed while idle before it was %v old", time.Duration(wallIdleRefresh))
	c.at = nanotime() - wallIdleRefresh
	for i := 1; i < wallIdleEvery; i++ {
		c.idled()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed while idle between looks (every %d empty polls)", wallIdleEvery)
	c.idled()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed at an idle look %v old", time.Duration(wallIdleRefresh))
}

func TestWallClock_AllocatesNothing(t *testing.T) {
	var c wallClock
	assert.Zero(t, testing.AllocsPerRun(10_000, func() { c.now(); c.idled() }))
}
