package rdma

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// IdleStrategy is what a poll loop does when a poll found no work, as in
// Aeron: call Idle(n) after every poll with the work it did; n > 0 resets the
// strategy. One strategy value per poll loop (strategies keep state).
type IdleStrategy interface {
	Idle(workCount int)
	Reset()
}

// BusySpin never gives up the CPU: lowest latency, one core per poller.
type BusySpin struct{}

func (BusySpin) Idle(int) {}
func (BusySpin) Reset()   {}

// Yield calls runtime.Gosched when idle: low latency, and it lets other
// goroutines (and the scheduler) run on a busy machine. Tests use it.
type Yield struct{}

func (Yield) Idle(workCount int) {
	if workCount == 0 {
		runtime.Gosched()
	}
}
func (Yield) Reset() {}

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
// counts time instead: for SpinFor after the last work it spins, yielding
// (runtime.Gosched, and on Linux sched_yield) once every
// adaptiveClockEvery calls; for YieldFor more it yields on every call; then
// it parks, sleeping MinPark doubling to MaxPark. A feed of thousands of
// ticks a second is received within microseconds; pollers that outnumber
// the cores (the demo: a pacing publisher and two subscribers on two
// cores) take turns within microseconds instead of the kernel's time
// slices; and an idle poller wakes about every MaxPark, a fraction of a
// percent of a core. BusySpin remains the lowest latency, at a core per
// poller.
//
// It reads the clock (vDSO) at most once per adaptiveClockEvery spins; a
// call with work costs a compare. The contract of IdleStrategy matters
// here: a wait that ends without Idle(n > 0) must call Reset, or the next
// wait starts where this one left off (parked). One strategy per poll
// loop; only Parks may be called from other goroutines.
type Adaptive struct {
	SpinFor  time.Duration // busy-spin this long after the last work
	YieldFor time.Duration // then yield the CPU on every call this long
	MinPark  time.Duration // then sleep, from MinPark doubling ...
	MaxPark  time.Duration // ... up to MaxPark

	since time.Duration // clock at the first idle call after work; 0: not idle
	calls uint32        // idle calls since the clock was last read
	phase uint32        // adaptiveSpin, adaptiveYield or adaptivePark
	park  time.Duration // next sleep in the park phase
	parks atomic.Uint64 // sleeps taken; read by Parks
}

// Adaptive's defaults (NewAdaptive).
const (
	DefaultSpinFor  = 50 * time.Microsecond
	DefaultYieldFor = 950 * time.Microsecond
	DefaultMinPark  = 50 * time.Microsecond
	DefaultMaxPark  = time.Millisecond
)

const (
	adaptiveSpin = iota
	adaptiveYield
	adaptivePark

	adaptiveClockEvery = 64 // idle spins between clock reads
)

// adaptiveEpoch is before any call, so clock() is monotonic and never 0.
var adaptiveEpoch = time.Now().Add(-time.Second)

func clock() time.Duration { return time.Since(adaptiveEpoch) }

// NewAdaptive returns an Adaptive with the defaults: spin 50 µs after the
// last work, yield 950 µs more, then park 50 µs doubling to 1 ms.
func NewAdaptive() *Adaptive {
	return &Adaptive{SpinFor: DefaultSpinFor, YieldFor: DefaultYieldFor, MinPark: DefaultMinPark, MaxPark: DefaultMaxPark}
}

func (a *Adaptive) Idle(workCount int) {
	if workCount > 0 {
		if a.since != 0 {
			a.Reset()
		}
		return
	}
	if a.since == 0 {
		a.since, a.calls = clock(), 0
		return
	}
	switch a.phase {
	case adaptiveSpin:
		if a.calls++; a.calls < adaptiveClockEvery {
			return
		}
		a.calls = 0
		if clock()-a.since < a.SpinFor {
			// Now and then let this P's other goroutines run (a provider's
			// helpers, timers: with every P spinning they would wait for
			// the runtime's preemption, 10 ms) and other threads have the
			// core (pollers that outnumber the cores would otherwise wait
			// for the kernel's time slice, milliseconds).
			runtime.Gosched()
			osYield()
			return
		}
		a.phase = adaptiveYield
		fallthrough
	case adaptiveYield:
		runtime.Gosched()
		osYield()
		if clock()-a.since < a.SpinFor+a.YieldFor {
			return
		}
		a.phase, a.park = adaptivePark, max(a.MinPark, time.Microsecond)
	default:
		time.Sleep(a.park)
		a.parks.Add(1)
		if a.park *= 2; a.park > a.MaxPark {
			a.park = max(a.MaxPark, time.Microsecond)
		}
	}
}

// Reset returns to the spin phase, as work does.
func (a *Adaptive) Reset() { a.since, a.calls, a.phase, a.park = 0, 0, adaptiveSpin, 0 }

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
