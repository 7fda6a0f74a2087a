package rdma

import "time"

// SetAdaptiveClock gives a a test's clock and sleep.
func SetAdaptiveClock(a *Adaptive, now func() time.Duration, sleep func(time.Duration)) {
	a.now, a.sleep = now, sleep
}

// AdaptivePhase is a's phase: 0 spin, 1 yield, 2 park, 3 deep park.
func AdaptivePhase(a *Adaptive) int { return int(a.phase) }

// AdaptiveWindow is the spin window of a's idle span.
func AdaptiveWindow(a *Adaptive) time.Duration { return a.window }
