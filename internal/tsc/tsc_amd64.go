//go:build amd64

package tsc

import (
	"os"
	"strings"
)

// Read returns the time-stamp counter (RDTSC), or 0 where it is not
// available.
func Read() int64

// Trusted: the kernel's clocksource is the TSC (it checked that the
// counter is invariant and in step across CPUs), so counts map to
// monotonic time at one rate. Read once, at start.
var Trusted = func() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}()
