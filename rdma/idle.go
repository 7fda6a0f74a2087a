package rdma

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/rdma/internal/handoff"
)

// IdleStrategy is what a poll loop does when a poll found no work, as in
// Aeron: call Idle(n) after every poll with the work it did; n > 0 resets the
// strategy. One strategy value per poll loop (strategies keep state).
type IdleStrategy interface {
	Idle(workCount int)
	Reset()
}

// BusySpin never gives up the CPU: lowest latency, one core per poller.
// Its one exception is a goroutine that a post of this loop just woke and
// that waits for this P (a tcp flusher, rdma/internal/handoff): it runs at
// once (runtime.Gosched), since it carries the loop's own work; with every
// P spinning it would otherwise wait for the runtime's preemption, 10 ms.
type BusySpin struct{}

func (BusySpin) Idle(workCount int) {
	if workCount == 0 && handoff.Pending() {
		runtime.Gosched()
	}
}
func (BusySpin) Reset() {}

// Yield gives the CPU away when idle (yieldOnce): low latency, and it lets
// other threads and goroutines run on a busy machine. Tests use it.
type Yield struct{}

func (Yield) Idle(workCount int) {
	if workCount == 0 {
		yieldOnce()
	}
}
func (Yield) Reset() {}

// yieldOnce is one idle step of a poll loop that lets others run without
// waking another scheduler thread: sched_yield(2) on every call (another
// runnable thread, of this process or any other, gets this core), and
// runtime.Gosched about once in goschedOneIn calls, at random (goroutines
// queued on this P, and its timers, which sched_yield cannot reach), or
// once in goschedNetOneIn while a tcp queue pair is open (idle_linux.go).
//
// Why not Gosched every time: Gosched puts the goroutine on the global run
// queue and calls wakep, which, with a P idle (one poller spinning at
// GOMAXPROCS 2), wakes that P's thread to look for work (runtime,
// goschedImpl); it finds none and parks again, a futex wake-up and a
// thread's spin per idle call, taken from the peer process on a 2-core
// machine. The random draw (math/rand/v2: per-thread state, no lock, no
// allocation) keeps Yield stateless; a goroutine readied on this P waits
// goschedOneIn sched_yields on average, more than k with probability
// (1-1/goschedOneIn)^k.
//
// A goroutine that a post just woke (internal/handoff) is let run at once:
// while one is pending, every call Goscheds.
func yieldOnce() {
	osYield()
	k := uint32(goschedOneIn)
	if handoff.Net() {
		k = goschedNetOneIn
	}
	if k == 1 || handoff.Pending() || rand.Uint32()%k == 0 {
		runtime.Gosched()
	}
}

// Backoff spins, then yields, then parks for an exponentially growing time
// from MinPark to MaxPark, as Aeron's BackoffIdleStrategy.
type Backoff struct {
	MaxSpins  int
	MaxYields int
	MinPark   time.Duration
	MaxPark   time.Duration

	spins, yields int
	park          time.Duration
}

// NewBackoff returns a Backoff with Aeron's defaults: 10 spins, 5 yields,
// parks from 1µs to 1ms.
func NewBackoff() *Backoff {
	return &Backoff{MaxSpins: 10, MaxYields: 5, MinPark: time.Microsecond, MaxPark: time.Millisecond}
}

func (b *Backoff) Idle(workCount int) {
	if workCount > 0 {
		b.Reset()
		return
	}
	switch {
	case b.spins < b.MaxSpins:
		b.spins++
	case b.yields < b.MaxYields:
		b.yields++
		runtime.Gosched()
	default:
		if b.park < b.MinPark {
			b.park = b.MinPark
		}
		time.Sleep(b.park)
		if b.park *= 2; b.park > b.MaxPark {
			b.park = b.MaxPark
		}
	}
}

func (b *Backoff) Reset() { b.spins, b.yields, b.park = 0, 0, 0 }

// Adaptive spins for a while after the last work, then yields, then parks:
// the default strategy. Backoff counts idle calls, so on a fast poll its
// spins and yields last nanoseconds and it parks between the ticks of any
// feed slower than a million a second; a park costs a timer wake-up (up to
// a millisecond in the Go runtime, whatever the sleep asked). Adaptive
// counts time instead, from the last work (or Reset):
//
//   - spin: for the spin window it polls flat out, with sched_yield once
//     every adaptiveClockEvery calls and runtime.Gosched once every
//     adaptiveClockEvery*adaptiveGoschedEvery. Gosched lets the process's
//     other goroutines run (with every P spinning they would wait for the
//     runtime's preemption, 10 ms), but not more often, because each one
//     wakes an idle P's thread (see yieldOnce); sched_yield lets other
//     threads run: pollers that outnumber the
//     cores, as in the demo, or a publisher and its subscriber that the
//     kernel put on one core, take turns within microseconds instead of
//     the kernel's time slices; without it, measured on this project's
//     loaded 2-core VM, the CLI's p50 went from 12-14 µs to milliseconds,
//     and with one sched_yield per 20 µs to 45-52 µs). The window
//     is twice the recent gap between works (an average over the last few),
//     at least SpinFor and at most SpinMax: a feed of up to some thousands
//     of ticks a second is polled in this phase from tick to tick;
//     A goroutine that a post of this loop just woke (a tcp flusher,
//     rdma/internal/handoff) runs at once: the call then Goscheds.
//   - yield: until YieldFor after SpinFor (or the end of a longer window),
//     Yield's step (yieldOnce) on every call;
//   - park: sleep MinPark, doubling up to MaxPark (on Linux in a raw
//     nanosleep on the thread while no goroutine waits for a P, osSleeper in
//     idle_linux.go: one wake-up per park, and the time asked, not
//     rounded up to the runtime's millisecond);
//   - deep park: after DeepAfter without work, sleep DeepPark per call, so
//     that a subscriber with nothing to read wakes a few hundred times a
//     second, not a thousand (each wake costs tens of microseconds of CPU
//     in the Go runtime and the kernel on a VM).
//
// So a flowing feed is received within microseconds, a poller that waits
// seconds costs a fraction of a percent of a core, and the first tick after
// a long silence waits up to DeepPark. BusySpin remains the lowest
// latency, at a core per poller.
//
// It reads the clock (vDSO) once per adaptiveClockEvery spins; a call with
// work costs a compare, the first idle call after work a clock read. The
// contract of IdleStrategy matters here: a wait that ends without
// Idle(n > 0) must call Reset, or the next wait starts where this one left
// off (parked). One strategy per poll loop; only Parks may be called from
// other goroutines.
type Adaptive struct {
	SpinFor   time.Duration // spin at least this long after the last work ...
	SpinMax   time.Duration // ... or twice the recent gap between works, up to SpinMax
	YieldFor  time.Duration // then yield on every call until SpinFor+YieldFor (or the window's end)
	MinPark   time.Duration // then sleep, from MinPark doubling ...
	MaxPark   time.Duration // ... up to MaxPark
	DeepAfter time.Duration // after this long without work ...
	DeepPark  time.Duration // ... sleep DeepPark per call (0: never deeper than MaxPark)

	since    time.Duration // clock at the first idle call after work; 0: not idle
	last     time.Duration // clock at the last reading in this idle span
	window   time.Duration // this span's spin window
	yieldEnd time.Duration // this span's end of the yield phase, from since
	gap      time.Duration // recent idle spans, averaged (sizes the window)
	calls    uint32        // idle calls since the clock was last read
	reads    uint32        // spin-phase clock reads (every adaptiveGoschedEvery-th also Goscheds)
	phase    uint32        // adaptiveSpin .. adaptiveDeep
	park     time.Duration // next sleep in the park phases
	parks    atomic.Uint64 // sleeps taken; read by Parks
	sleeper  osSleeper     // the park's state (osSleeper, idle_linux.go)

	// Tests' clock and sleep; nil: clock() and time.Sleep.
	now   func() time.Duration
	sleep func(time.Duration)
}

// Adaptive's defaults (NewAdaptive).
const (
	DefaultSpinFor   = 50 * time.Microsecond
	DefaultSpinMax   = time.Millisecond
	DefaultYieldFor  = 950 * time.Microsecond
	DefaultMinPark   = 50 * time.Microsecond
	DefaultMaxPark   = time.Millisecond
	DefaultDeepAfter = time.Second
	DefaultDeepPark  = 4 * time.Millisecond
)

const (
	adaptiveSpin = iota
	adaptiveYield
	adaptivePark
	adaptiveDeep

	adaptiveClockEvery   = 64 // idle spins between clock reads
	adaptiveGoschedEvery = 8  // spin-phase clock reads between runtime.Goscheds
)

// adaptiveEpoch is before any call, so clock() is monotonic and never 0.
var adaptiveEpoch = time.Now().Add(-time.Second)

func clock() time.Duration { return time.Since(adaptiveEpoch) }

// NewAdaptive returns an Adaptive with the defaults: spin 50 µs after the
// last work (or twice the recent gap between works, up to 1 ms); yield on
// every call until 1 ms; then
// park 50 µs doubling to 1 ms; after 1 s without work, park 4 ms.
func NewAdaptive() *Adaptive {
	return &Adaptive{SpinFor: DefaultSpinFor, SpinMax: DefaultSpinMax, YieldFor: DefaultYieldFor,
		MinPark: DefaultMinPark, MaxPark: DefaultMaxPark, DeepAfter: DefaultDeepAfter, DeepPark: DefaultDeepPark}
}

func (a *Adaptive) clock() time.Duration {
	if a.now != nil {
		return a.now()
	}
	return clock()
}

func (a *Adaptive) doSleep(d time.Duration) {
	if a.sleep != nil {
		a.sleep(d)
	} else {
		a.sleeper.sleep(d)
	}
	a.parks.Add(1)
}

func (a *Adaptive) Idle(workCount int) {
	if workCount > 0 {
		if a.since != 0 {
			a.Reset()
		}
		return
	}
	if a.since == 0 {
		a.begin()
		return
	}
	switch a.phase {
	case adaptiveSpin:
		if a.calls++; a.calls < adaptiveClockEvery {
			if handoff.Pending() {
				runtime.Gosched() // a goroutine this loop just woke waits for its P
			}
			return
		}
		a.calls = 0
		if a.reads++; a.reads%adaptiveGoschedEvery == 0 {
			runtime.Gosched() // rarely: each one wakes an idle P's thread (yieldOnce)
		}
		now := a.clock()
		a.last = now
		if now-a.since < a.window {
			osYield()
			return
		}
		a.phase = adaptiveYield
		fallthrough
	case adaptiveYield:
		yieldOnce()
		now := a.clock()
		a.last = now
		if now-a.since < a.yieldEnd {
			return
		}
		a.phase, a.park = adaptivePark, max(a.MinPark, time.Microsecond)
	case adaptivePark:
		a.doSleep(a.park)
		a.last = a.clock()
		if a.DeepPark > 0 && a.last-a.since >= a.DeepAfter {
			a.phase, a.park = adaptiveDeep, a.DeepPark
			return
		}
		if a.park *= 2; a.park > a.MaxPark {
			a.park = max(a.MaxPark, time.Microsecond)
		}
	default:
		a.doSleep(a.park)
	}
}

// begin starts an idle span: the clock, and the spin window from the
// recent gaps.
func (a *Adaptive) begin() {
	now := a.clock()
	a.since, a.last, a.calls = now, now, 0
	a.window = min(max(2*a.gap, a.SpinFor), max(a.SpinMax, a.SpinFor))
	a.yieldEnd = max(a.SpinFor+a.YieldFor, a.window)
}

// Reset returns to the spin phase, as work does; the span that ends
// (measured to the last clock reading, no new one) counts toward the
// recent gap.
func (a *Adaptive) Reset() {
	if a.since != 0 {
		span := min(a.last-a.since, max(a.SpinMax, a.SpinFor))
		a.gap += (span - a.gap) / 4
	}
	a.since, a.calls, a.phase, a.park = 0, 0, adaptiveSpin, 0
}

// Parks is how many times the strategy has slept; safe from any goroutine.
func (a *Adaptive) Parks() uint64 { return a.parks.Load() }

// ParseIdle makes a fresh strategy from its configuration name: "adaptive"
// (also ""), "spin", "yield" or "backoff".
func ParseIdle(name string) (IdleStrategy, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "adaptive", "":
		return NewAdaptive(), nil
	case "spin", "busy-spin", "busyspin":
		return BusySpin{}, nil
	case "yield":
		return Yield{}, nil
	case "backoff":
		return NewBackoff(), nil
	}
	return nil, fmt.Errorf("%w: idle strategy %q, want adaptive, spin, yield or backoff", ErrInvalidConfig, name)
}
