package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listRx hands out fixed (seq, ts) pairs.
type listRx struct{ items [][2]int64 }

func (l *listRx) next(int64) (int64, int64, error) {
	if len(l.items) == 0 {
		return 0, 0, ErrDeadline
	}
	it := l.items[0]
	l.items = l.items[1:]
	return it[0], it[1], nil
}
func (l *listRx) close() error { return nil }

// A latency run's slow-tick log keeps the ticks over slowOver only, with
// their intended times, stops at its capacity without allocating, and
// writes one line per tick it kept.
func TestSlowLog_KeepsSlowTicksAndWritesThem(t *testing.T) {
	now := nanotime()
	slowTs, fastTs := now-int64(1e9), now+int64(3600e9) // 1 s late; not yet due
	rx := &listRx{items: [][2]int64{{0, slowTs}, {1, fastTs}, {2, endMark}}}
	s := &slowLog{at: make([]int64, 0, 8), lat: make([]int64, 0, 8)}
	st, err := subLoopSlow(rx, nil, true, 1, now+int64(10e9), s)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.count)
	require.Len(t, s.at, 1, "the slow tick only")
	assert.Equal(t, slowTs, s.at[0])
	assert.Greater(t, s.lat[0], int64(1e9)-1)

	path := filepath.Join(t.TempDir(), "x.slow.csv")
	require.NoError(t, s.write(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 3)
	assert.True(t, strings.HasPrefix(lines[0], "# "))
	assert.Equal(t, "intended_ns,latency_ns", lines[1])
	assert.Equal(t, slowTs, mustInt(t, strings.Split(lines[2], ",")[0]))

	full := &slowLog{at: make([]int64, 0, 2), lat: make([]int64, 0, 2)}
	allocs := testing.AllocsPerRun(10, func() { full.note(1, slowOver+1) })
	assert.Zero(t, allocs)
	assert.Len(t, full.at, 2, "capped at its capacity")

	assert.Equal(t, "a/b.slow.csv", slowPath("a/b.pprof"))
	assert.Empty(t, slowPath(""))
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}
