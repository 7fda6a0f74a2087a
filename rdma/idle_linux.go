package rdma

import "golang.org/x/sys/unix"

// osYield gives this thread's CPU to another runnable thread, if there is
// one (sched_yield(2)); it returns at once otherwise. It is what lets two
// spinning pollers share one core: runtime.Gosched only lets other
// goroutines of this process run. A raw call: it cannot block, so the
// runtime need not hand the P off.
func osYield() { _, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// goschedOneIn: yieldOnce calls runtime.Gosched about once in this many
// calls; sched_yield does the rest.
const goschedOneIn = 8
