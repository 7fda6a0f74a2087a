package ring

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/tickbus/tickbus/internal/tsc"
)

// The lease end is checked on every claim (Writer.claimable), where a
// clock read would cost more than the claim. So the writer keeps, beside
// the lease end in monotonic ns, the TSC value before which the lease
// surely has not ended: while the TSC is below it a claim is in time with
// no clock read; past it the claim reads the clock and decides exactly.
// The TSC deadline is an underestimate (the TSC rate is calibrated from
// the SetLeaseEnd calls' own clock readings and taken 5% low), so the fast
// path never admits a claim past the lease end; a stall (SIGSTOP) moves the
// TSC with real time, as the monotonic clock does. The TSC read itself
// (~18 ns on a VM) is still more than half of a lean tick, so the lean
// path reads it once per leaseEvery ticks (writer_lean.go says what a
// stall inside that window does); every other claim reads it each time.

// tscCal is the TSC's rate, learned from pairs of (TSC, monotonic ns)
// readings at least tscCalMin apart.
var tscCal struct {
	mu       sync.Mutex
	tsc0, n0 int64
	perNs    atomic.Uint64 // float64 bits: TSC ticks per ns; 0 until known
	learnt   atomic.Int64  // monoNs of tscLearn's last reading, process-wide
}

const tscCalMin = 20e6 // ns between the readings a rate is taken from

// The calibration's first pair is taken when the process starts, so that
// the first SetLeaseEnd (a publisher's first lease, well after start-up)
// usually knows the rate and gives its writer a TSC deadline at once,
// instead of a clock read per claim until tscLearn has two pairs.
func init() { tscObserve(tsc.Read(), monoNs()) }

// tscObserve records a (TSC, monotonic ns) pair; control path.
func tscObserve(ts, ns int64) {
	if !tsc.Trusted {
		return
	}
	tscCal.mu.Lock()
	defer tscCal.mu.Unlock()
	if tscCal.n0 == 0 || ts < tscCal.tsc0 || ns < tscCal.n0 {
		tscCal.tsc0, tscCal.n0 = ts, ns
		return
	}
	if d := ns - tscCal.n0; d >= tscCalMin {
		tscCal.perNs.Store(math.Float64bits(float64(ts-tscCal.tsc0) / float64(d)))
	}
}

// tscDeadline is the TSC value before which monotonic time surely is
// before end, measured from the pair (ts, now); 0 when the rate is not
// known yet (every claim reads the clock).
func tscDeadline(ts, now, end int64) int64 {
	r := math.Float64frombits(tscCal.perNs.Load())
	if r <= 0 || end <= now {
		return 0
	}
	d := float64(end-now) * r * 0.95
	if d >= math.MaxInt64/2 {
		return 0
	}
	return ts + int64(d)
}

// tscLearn runs on a claim that read the clock because the writer has no
// TSC deadline (the rate was not known yet when its lease end was set: a
// fresh process's first lease, until the next renewal seconds later). It
// adds a (TSC, clock) pair to the calibration, at most once per
// tscCalMin/4 in the process, and once the rate is known gives the writer
// the TSC deadline of end, the lease end it still has, so its later claims
// read the TSC only. The TSC is read before the clock, so the deadline
// errs early, as SetLeaseEnd's. A SetLeaseEnd under way or in between
// (leaseGen moved) wins: the deadline is taken back. Publishing goroutine.
func (w *Writer) tscLearn(end int64) {
	if !tsc.Trusted {
		return
	}
	g := w.leaseGen.Load() // pairs with SetLeaseEnd's Adds
	last := tscCal.learnt.Load()
	ts, now := tsc.Read(), monoNs()
	if g&1 != 0 || now-last < tscCalMin/4 || !tscCal.learnt.CompareAndSwap(last, now) {
		return
	}
	tscObserve(ts, now)
	d := tscDeadline(ts, now, end)
	if d == 0 || w.lease.Load() != end || !w.leaseTSC.CompareAndSwap(0, d) {
		return
	}
	if w.leaseGen.Load() != g {
		w.leaseTSC.CompareAndSwap(d, 0) // a SetLeaseEnd ran meanwhile: its values stand
	}
}
