//go:build amd64

package ring

import (
	"os"
	"strings"
)

// rdtsc reads the CPU's time-stamp counter: a few cycles, where a clock
// read (the vDSO) costs 40-50 ns on a VM.
func rdtsc() int64

// tscTrusted: the kernel keeps time with the TSC (it checked the counter
// is invariant and in step across CPUs), so the writer may bound its
// claims with it (leaseclock.go). Read once.
var tscTrusted = func() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}()
