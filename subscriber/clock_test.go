package subscriber

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWallClock_IsTheWallClock(t *testing.T) {
	var c wallClock
	for i := 0; i < 3*wallRefreshEvery; i++ {
		before := time.Now().UnixNano()
		v := c.now()
		after := time.Now().UnixNano()
		// Wide bounds (a preempted test, a step of the wall clock): a
		// monotonic reading or a stale offset would be off by years.
		assert.GreaterOrEqual(t, v, before-int64(100*time.Millisecond))
		assert.LessOrEqual(t, v, after+int64(100*time.Millisecond))
	}
}

func TestWallClock_RefreshesEveryNReadingsAndIdlePolls(t *testing.T) {
	var c wallClock
	c.now()
	const bogus = 12345 // an offset no refresh gives
	c.off = bogus
	for i := 1; i < wallRefreshEvery; i++ {
		c.now()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed before %d readings", wallRefreshEvery)
	c.now()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed after %d readings", wallRefreshEvery)

	c.off = bogus
	for i := 1; i < wallIdleEvery; i++ {
		c.idled()
	}
	assert.EqualValues(t, bogus, c.off, "refreshed before %d empty polls", wallIdleEvery)
	c.idled()
	assert.NotEqualValues(t, bogus, c.off, "not refreshed after %d empty polls", wallIdleEvery)
}

func TestWallClock_AllocatesNothing(t *testing.T) {
	var c wallClock
	assert.Zero(t, testing.AllocsPerRun(10_000, func() { c.now(); c.idled() }))
}
