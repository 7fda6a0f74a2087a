package ring

import (
	"context"
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

// Run polls until ctx is done or the ring is closed, giving idle the work
// count of every poll (rdma.BusySpin for the lowest latency, rdma.Yield or
// a Backoff to share the CPU). It returns ctx's error or ErrClosed. The
// loop checks a flag, not the context, so it takes no lock per poll.
// Cancel ctx and wait for Run to return before Ring.Close.
func (r *Reader) Run(ctx context.Context, h Handler, idle rdma.IdleStrategy) error {
	var stop atomic.Bool
	defer context.AfterFunc(ctx, func() { stop.Store(true) })() // pairs with the Load below
	for !stop.Load() {
		if r.closed.Load() { // pairs with the Store in Ring.Close
			return ErrClosed
		}
		idle.Idle(r.Poll(h))
	}
	return ctx.Err()
}
