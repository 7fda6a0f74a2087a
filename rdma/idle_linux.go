package rdma

import (
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

// osSleeper is Adaptive's park: sleep sleeps d in nanosleep(2), as a raw
// system call, on this thread, when no other goroutine waits for a P; in
// time.Sleep otherwise.
//
// Why not time.Sleep always: it parks the goroutine on a runtime timer,
// and each wake-up goes through the scheduler: the idle P's thread blocks
// in epoll_pwait, whose millisecond timeout is rounded down (a 4 ms sleep
// is a 3 ms wait, then a 1 ms one); the thread the timer woke wakes a
// second one to look for work (wakep); and sysmon, seeing every P idle,
// sleeps until that same timer and wakes with it. Why raw: a sleep the
// runtime sees (Syscall) wakes sysmon at every entry while it waits for
// an idle process (entersyscall), which then polls at 20 µs: an idle
// subscriber made 1,050-1,100 context switches a second that way, against
// about 900 with time.Sleep and about 410 raw. A raw sleep is one wake-up
// of this thread, and it returns to the same P.
//
// The runtime takes the goroutine for running meanwhile: its P serves no
// other goroutine. So a raw sleep is taken only while no goroutine waits
// for a P (runtime/metrics, about 100 ns, no allocation), and while fewer
// than GOMAXPROCS-1 goroutines sleep so (rawSleepers): a goroutine readied
// during the sleep finds another P, or, if every other P is busy, waits at
// most until the sleep ends, as the next park, seeing it wait, sleeps in
// time.Sleep and gives the P up. (Also demanding fewer than GOMAXPROCS
// goroutines running, this one included, made an idle subscriber's park
// fall back to time.Sleep in 5-14 % of parks, at 1.7-2.0 % of a core
// against 1.4-1.5 %.) A signal ends the sleep early (EINTR: nanosleep is
// never restarted), so a stop-the-world or a preemption waits
// microseconds, not d, and the park is shorter, never longer; sysmon
// preempts a goroutine it has seen running for 10 ms, so a deep-parked
// loop's every second or third park ends so.
type osSleeper struct {
	s [1]metrics.Sample // runnable goroutines; the Adaptive's own (no allocation per park)
}

func (o *osSleeper) sleep(d time.Duration) {
	if !o.free() {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	if n := rawSleepers.Add(1); int(n) < runtime.GOMAXPROCS(0) {
		rawSleeps.Add(1)
		for m := rawSleepersMax.Load(); n > m && !rawSleepersMax.CompareAndSwap(m, n); m = rawSleepersMax.Load() {
		}
		_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		rawSleepers.Add(-1)
		return
	}
	rawSleepers.Add(-1)
	time.Sleep(d)
}

// free reports whether no goroutine waits for a P.
func (o *osSleeper) free() bool {
	if o.s[0].Name == "" {
		o.s[0].Name = "/sched/goroutines/runnable:goroutines"
	}
	metrics.Read(o.s[:])
	if o.s[0].Value.Kind() != metrics.KindUint64 {
		return false // a runtime without it: the safe sleep
	}
	return o.s[0].Value.Uint64() == 0
}

var (
	rawSleepers    atomic.Int32  // goroutines in osSleeper's raw nanosleep (or deciding)
	rawSleepersMax atomic.Int32  // the most at once (tests check the bound)
	rawSleeps      atomic.Uint64 // raw sleeps taken (tests)
)
