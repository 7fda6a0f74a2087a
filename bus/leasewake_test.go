package bus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// holdLease sleeps until its next renewal or its fence, whichever is
// first, never a fixed tick and never less than a millisecond.
func TestNextLeaseWake_RenewalOrFenceWhicheverIsFirst(t *testing.T) {
	now := time.Unix(1000, 0)
	assert.Equal(t, 100*time.Millisecond, nextLeaseWake(now, now.Add(100*time.Millisecond), now.Add(500*time.Millisecond)), "renewal first")
	assert.Equal(t, 50*time.Millisecond, nextLeaseWake(now, now.Add(100*time.Millisecond), now.Add(50*time.Millisecond)), "fence first (a renewal outstanding)")
	assert.Equal(t, time.Millisecond, nextLeaseWake(now, now.Add(-time.Second), now.Add(time.Second)), "renewal overdue: at once, not a busy loop")
	assert.Equal(t, time.Millisecond, nextLeaseWake(now, now.Add(time.Second), now.Add(-time.Second)), "fence passed: at once")
}
