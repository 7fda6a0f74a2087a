package rdma

import "golang.org/x/sys/unix"

// osYield gives this thread's CPU to another runnable thread, if there is
// one (sched_yield(2)); it returns at once otherwise. It is what lets two
// spinning pollers share one core: runtime.Gosched only lets other
// goroutines of this process run. A raw call: it cannot block, so the
// runtime need not hand the P off.
func osYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// goschedOneIn: yieldOnce calls runtime.Gosched about once in this many
// calls; sched_yield does the rest. goschedNetOneIn replaces it while the
// process has a tcp queue pair open (handoff.Net): its reader, flusher,
// reaper and poller goroutines share the Ps with the poll loops and get
// one only when a spinning goroutine Goscheds.
//
// Why 64 and 8 (bench A/B, goschedOneIn 8 against 64 for every loop,
// alternating, three pairs at load 6-14, 2026-12-02): with 64 the shm
// case's one-way p50 fell from 2.3-3.2 to 1.2-1.3 µs and the floor's from
// 2.8-3.0 to 0.86-0.93 µs (every Gosched wakes the idle P's thread, which
// takes the core the peer process polls on), while tickbus-tcp's p99 rose
// from 79-127 µs to 0.9-3.8 ms (its reader waits for the netpoller).
const (
	goschedOneIn    = 64
	goschedNetOneIn = 8
)
