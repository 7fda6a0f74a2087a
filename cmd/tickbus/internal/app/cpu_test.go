package app

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatCPU_SumsUserAndSystemTicks(t *testing.T) {
	// A command name with spaces and a ')' of its own.
	line := "42 (tick bus) x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 0 0\n"
	d, err := parseStatCPU(line)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d) // (250+50) ticks of 10 ms

	for _, bad := range []string{"", "42 tickbus S 1", "42 (t) S 1 2 3", "42 (t) S 1 42 42 0 -1 4194560 100 0 0 0 x 50 0", "42 (t) S 1 42 42 0 -1 4194560 100 0 0 0 -1 50 0",
		"42 (t) S 1 42 42 0 -1 4194560 100 0 0 0 9223372036854775807 9223372036854775807 0"} {
		_, err := parseStatCPU(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestProcessCPU_OfThisProcess(t *testing.T) {
	d, err := processCPU(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, time.Duration(0))
	_, err = processCPU(-1)
	require.ErrorIs(t, err, errCPU)
}

// FuzzParseStatCPU: any line gives a non-negative time or an error, never a
// panic.
func FuzzParseStatCPU(f *testing.F) {
	f.Add("42 (tickbus) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 12345 0 0\n")
	f.Add("1 ((() R")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseStatCPU(s)
		if err == nil && d < 0 {
			t.Fatalf("negative cpu time %v from %q", d, s)
		}
	})
}
