package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its thread and pins the thread
// to cpu. Only pinned loops are locked: a locked goroutine that yields
// (runtime.Gosched) hands its P to another thread through a futex each time,
// which costs more than the yield itself.
func pinThread(cpu int) error {
	runtime.LockOSThread() // not undone: a pinned thread exits with its goroutine
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bench: pin to cpu %d: %w", cpu, err)
	}
	return nil
}

// pinFromConfig pins the calling thread to the k-th configured CPU (round
// robin), if any are configured.
func pinFromConfig(cfg Config, k int) error {
	if len(cfg.CPUs) == 0 {
		return nil
	}
	return pinThread(cfg.CPUs[k%len(cfg.CPUs)])
}

// selfCPU is this process's user+system time so far.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a running process's user+system time from /proc (clock-tick
// resolution, 10 ms here).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: cpu of %d: %w", pid, err)
	}
	// The command name may hold spaces; fields start after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: cpu of %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: cpu of %d: malformed stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: cpu of %d: malformed stat", pid)
	}
	const clkTck = 100 // sysconf(_SC_CLK_TCK) on Linux
	return time.Duration(ut+st) * time.Second / clkTck, nil
}
