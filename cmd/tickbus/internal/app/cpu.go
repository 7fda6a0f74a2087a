package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errCPU: a process's CPU time could not be read.
var errCPU = errors.New("tickbus: process cpu time")

// processCPU is the CPU time pid's live threads have run, summed from each
// thread's /proc/PID/task/TID/schedstat (the scheduler's own nanosecond
// count, not the clock-tick samples of /proc/PID/stat, which miss or
// overcount a poller that wakes for microseconds every millisecond).
func processCPU(pid int) (time.Duration, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(dirs) == 0 {
		return 0, fmt.Errorf("%w: pid %d: no /proc/%d/task/*/schedstat", errCPU, pid, pid)
	}
	var sum time.Duration
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that exited between the glob and the read
		}
		ns, err := parseSchedstat(string(b))
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", errCPU, f, err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads the first field of a schedstat line: time spent on
// the CPU, in ns ("<run ns> <wait ns> <timeslices>").
func parseSchedstat(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, fmt.Errorf("want 3 fields, got %q", s)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("run time %q is not a count of ns", f[0])
	}
	return time.Duration(ns), nil
}
