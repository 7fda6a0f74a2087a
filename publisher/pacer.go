package publisher

import (
	"fmt"
	"math"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// Pacer spaces sends at a target rate, measured from each send's intended
// time rather than from the previous send, so that a stall is not hidden:
// when the publisher falls behind, the next sends go at once and their
// intended times (which latency is measured from) stay where the schedule
// put them. This is what keeps coordinated omission out of the latency
// figures. With rate 0 it does not pace: every send is intended now.
//
// The schedule runs on the monotonic clock; an intended time is stamped on
// the wall clock that subscribers subtract it from (time.Now().UnixNano()):
// the wall clock read at the send, less how late the send is on the
// schedule. A stamp derived from the start (start's wall time plus the
// monotonic offset) would carry into the latency every step or slew of the
// wall clock since the start: on this project's VM the wall clock is at
// times stepped 0.5 ms every 100 ms against the monotonic one, which added
// 1 to 6 ms to every latency of a `tickbus pub` run.
type Pacer struct {
	start    time.Time    // monotonic origin of the schedule
	interval float64      // ns between sends; 0: as fast as possible
	n        uint64       // sends scheduled so far
	wallNs   func() int64 // the wall clock, ns since the Unix epoch (tests replace it)
}

func wallNs() int64 { return time.Now().UnixNano() }

// NewPacer starts a schedule of rate sends per second from now; rate 0 means
// as fast as possible.
func NewPacer(rate float64) (*Pacer, error) {
	if math.IsNaN(rate) || rate < 0 || rate > 1e9 {
		return nil, fmt.Errorf("%w: rate %v, want 0 (as fast as possible) .. 1e9 per second", ErrInvalidConfig, rate)
	}
	p := &Pacer{start: time.Now(), wallNs: wallNs}
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	return p, nil
}

// Wait waits, through idle, until the next send's intended time and returns
// that time in ns since the Unix epoch. It returns early with ok false when
// stop reports true. It allocates nothing.
func (p *Pacer) Wait(idle rdma.IdleStrategy, stop func() bool) (intended int64, ok bool) {
	if p.interval == 0 {
		p.n++
		return p.wallNs(), true
	}
	due := time.Duration(float64(p.n) * p.interval)
	p.n++
	for {
		el := time.Since(p.start)
		if el >= due {
			idle.Reset()
			return p.wallNs() - int64(el-due), true
		}
		if stop != nil && stop() {
			return 0, false
		}
		// Far from due: park rather than burn the core a low-rate feed does
		// not need. Close to due, the idle strategy decides.
		if due-el > 2*time.Millisecond {
			time.Sleep(min(due-el-time.Millisecond, 10*time.Millisecond))
			continue
		}
		idle.Idle(0)
	}
}

// Behind is how far the schedule is behind now: how late the last send
// scheduled was (0 when on time or unpaced).
func (p *Pacer) Behind() time.Duration {
	if p.interval == 0 || p.n == 0 {
		return 0
	}
	late := time.Since(p.start) - time.Duration(float64(p.n-1)*p.interval)
	if late < 0 {
		return 0
	}
	return late
}
