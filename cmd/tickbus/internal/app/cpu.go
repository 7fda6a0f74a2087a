package app

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// errCPU: a process's CPU time could not be read.
var errCPU = errors.New("tickbus: process cpu time")

// processCPU is the CPU time pid has used (user plus system, every thread
// it ever had), from /proc/PID/stat. The kernel scales the sampled user and
// system times to the scheduler's exact run time, so the sum is exact to
// the clock tick it is printed in (10 ms): measure over seconds.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errCPU, err)
	}
	d, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("%w: pid %d: %w", errCPU, pid, err)
	}
	return d, nil
}

// maxTicks bounds a parsed time (about 348 years): the product below cannot
// overflow.
const maxTicks = 1 << 40

// clkTck is sysconf(_SC_CLK_TCK), 100 on every Linux the kernel ABI allows.
const clkTck = 100

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses: fields are counted after its last ')'.
func parseStatCPU(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // f[0] is field 3
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxTicks {
			return 0, fmt.Errorf("cpu time %q is not a count of clock ticks", v)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clkTck, nil
}
