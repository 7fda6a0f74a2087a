package rdma

import (
	"fmt"
	"runtime"
	"strings"
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

// ParseIdle makes a fresh strategy from its configuration name: "spin",
// "yield" or "backoff".
func ParseIdle(name string) (IdleStrategy, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "spin", "busy-spin", "busyspin":
		return BusySpin{}, nil
	case "yield":
		return Yield{}, nil
	case "backoff", "":
		return NewBackoff(), nil
	}
	return nil, fmt.Errorf("%w: idle strategy %q, want spin, yield or backoff", ErrInvalidConfig, name)
}
