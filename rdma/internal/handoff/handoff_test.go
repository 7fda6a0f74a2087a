package handoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHandoff_PendingUntilDoneOrWindow(t *testing.T) {
	Done()
	assert.False(t, Pending(), "nothing marked")
	// Pending right after Mark, unless this goroutine lost its CPU for the
	// whole window in between: of 100 tries, one is enough.
	seen := false
	for i := 0; i < 100 && !seen; i++ {
		Mark()
		seen = Pending()
	}
	assert.True(t, seen, "never pending right after Mark")
	Done()
	assert.False(t, Pending(), "done")

	Mark()
	time.Sleep(2 * time.Millisecond) // at least 40 windows: a lower bound, not a speed check
	assert.False(t, Pending(), "a lost Done is forgotten after the window")
	assert.Zero(t, mark.at.Load(), "and the mark is cleared")
}

func TestHandoff_AllocatesNothing(t *testing.T) {
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		Mark()
		_ = Pending()
		Done()
	}))
}

func TestHandoff_NetWhileASocketIsOpen(t *testing.T) {
	assert.False(t, Net(), "no socket open")
	NetOpen()
	NetOpen()
	assert.True(t, Net(), "two open")
	NetClose()
	assert.True(t, Net(), "one still open")
	NetClose()
	assert.False(t, Net(), "both closed")
}
