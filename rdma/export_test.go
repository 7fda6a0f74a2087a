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

// OSSleeper is Adaptive's park (osSleeper).
type OSSleeper = osSleeper

// Sleep is Adaptive's park of d.
func (o *OSSleeper) Sleep(d time.Duration) { o.sleep(d) }

// RawSleeps is how many of osSleeper's sleeps were raw nanosleeps, and the
// most at once; ResetRawSleepersMax clears the latter.
func RawSleeps() (n uint64, most int32) { return rawSleeps.Load(), rawSleepersMax.Load() }
func ResetRawSleepersMax()              { rawSleepersMax.Store(0) }
