package ring

import (
	"math"
	"sync"
	"sync/atomic"
)

// The lease end is checked on every claim (Writer.claimable), where a
// clock read would cost more than the claim. So the writer keeps, beside
// the lease end in monotonic ns, the TSC value before which the lease
// surely has not ended: while the TSC is below it a claim is in time with
// no clock read; past it the claim reads the clock and decides exactly.
// The TSC deadline is an underestimate (the TSC rate is calibrated from
// the SetLeaseEnd calls' own clock readings and taken 5% low), so the fast
// path never admits a claim past the lease end; a stall (SIGSTOP) moves the
// TSC with real time, as the monotonic clock does.

// tscCal is the TSC's rate, learned from pairs of (TSC, monotonic ns)
// readings at least tscCalMin apart.
var tscCal struct {
	mu       sync.Mutex
	tsc0, n0 int64
	perNs    atomic.Uint64 // float64 bits: TSC ticks per ns; 0 until known
}

const tscCalMin = 20e6 // ns between the readings a rate is taken from

// tscObserve records a (TSC, monotonic ns) pair; control path.
func tscObserve(tsc, ns int64) {
	if !tscTrusted {
		return
	}
	tscCal.mu.Lock()
	defer tscCal.mu.Unlock()
	if tscCal.n0 == 0 || tsc < tscCal.tsc0 || ns < tscCal.n0 {
		tscCal.tsc0, tscCal.n0 = tsc, ns
		return
	}
	if d := ns - tscCal.n0; d >= tscCalMin {
		tscCal.perNs.Store(math.Float64bits(float64(tsc-tscCal.tsc0) / float64(d)))
	}
}

// tscDeadline is the TSC value before which monotonic time surely is
// before end, measured from the pair (tsc, now); 0 when the rate is not
// known yet (every claim reads the clock).
func tscDeadline(tsc, now, end int64) int64 {
	r := math.Float64frombits(tscCal.perNs.Load())
	if r <= 0 || end <= now {
		return 0
	}
	d := float64(end-now) * r * 0.95
	if d >= math.MaxInt64/2 {
		return 0
	}
	return tsc + int64(d)
}
