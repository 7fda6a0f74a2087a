package ring

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/internal/tsc"
	"github.com/tickbus/tickbus/rdma"
)

// Epochs and fencing.
//
// A topic's home is elected outside ring (the bus, on JetStream); each
// home's term is an epoch. Every epoch owns a range of sequences: it starts
// at Start and hands out nothing at or above its reservation, and the next
// epoch starts at the last reservation its predecessor made. So sequences
// of different epochs never collide, and two rules keep an old epoch from
// landing a tick where a new one is read:
//
//   - Writer side (SetLimit): a claim whose sequences reach the limit (the
//     reservation the writer knows, or 0 once it learnt that its epoch
//     ended) is not written; it returns ErrFenced, a retryable error: find
//     the topic's home again. The check is the writer's own, after its
//     claim's completion, so it works the same on a NIC, where the home's
//     CPU takes no part in a claim.
//   - Reader side (SetEpoch): a reader told that a new epoch starts at S
//     while it waits for next < S reports next..S-1 with one EventEpoch
//     once nothing of that range arrives for the gap timeout (or at once
//     when a tick of the new epoch already sits in next's slot), and goes
//     on at S. A late tick of the old epoch can only carry a sequence below
//     S, which the reader has passed: it is never delivered out of order.
//
// A stamp ahead of the reader (a lapped slot) is trusted only if the slot's
// header check passes for it and it is below the bound the reader knows
// (the newest reservation): one stray 8-byte WRITE cannot make a reader
// jump ahead.

// SetLimit bounds the sequences the writer may write: a claim reaching
// limit returns ErrFenced and writes nothing. 0 fences the writer
// entirely. Safe from any goroutine; the default is no limit.
func (w *Writer) SetLimit(limit uint64) {
	w.fence.Store(limit) // pairs with the Load in inLimit
}

// SetLeaseEnd bounds the writer's claims in time: a claim that completes
// at or after end is not written and returns ErrFenced, as one that
// reaches the limit does (its sequences are reported by readers as a gap
// or with the epoch's unused range). The publisher of a home held on this
// node sets it to the moment its lease loop gives the home up (the last
// renewal plus three quarters of the lease): a home that stalled (SIGSTOP,
// a long pause, CPU starvation) and wakes up past its lease must not write
// what it claims from its own counter before its lease loop has run and
// fenced it, since a newer epoch may be writing the same slots. What was
// claimed in time and is being written when the process stalls still
// lands when it resumes (no check can stop a copy under way); the lease's
// last quarter is the margin for it. The zero time removes the bound.
// Safe from any goroutine.
//
// While set, a claim costs a TSC read (the lean path's: one per leaseEvery
// ticks, writer_lean.go), and a clock read only near the end
// (leaseclock.go).
func (w *Writer) SetLeaseEnd(end time.Time) {
	w.leaseGen.Add(1) // odd: an update under way (tscLearn); pairs with its Loads
	defer w.leaseGen.Add(1)
	if end.IsZero() {
		w.leaseTSC.Store(0)
		w.lease.Store(0) // pairs with the Load in claimable
		return
	}
	ts, now := tsc.Read(), monoNs()
	tscObserve(ts, now)
	e := max(now+int64(time.Until(end)), 1)
	w.leaseTSC.Store(0) // never a fast deadline beyond the lease being stored
	w.lease.Store(e)    // pairs with the Load in claimable
	w.leaseTSC.Store(tscDeadline(ts, now, e))
}

// claimable is inLimit for a claim just made: also within the lease end.
func (w *Writer) claimable(first, n uint64) bool {
	if e := w.lease.Load(); e != 0 { // pairs with the Store in SetLeaseEnd
		if d := w.leaseTSC.Load(); d == 0 || tsc.Read() >= d {
			now := monoNs()
			if now >= e {
				return false
			}
			if d == 0 {
				w.tscLearn(e)
			}
		}
	}
	return w.inLimit(first, n)
}

// Limit is the writer's limit (see SetLimit).
func (w *Writer) Limit() uint64 { return w.fence.Load() }

// inLimit reports whether first..first+n-1 are all below the limit.
func (w *Writer) inLimit(first, n uint64) bool {
	return first+n <= w.fence.Load() && first+n >= first // pairs with the Store in SetLimit
}

// SetEpoch tells the reader that the topic's epoch starting at start is
// current and that no sequence at or above reserved has been handed out.
// Safe from any goroutine while Poll runs. A start at or below the
// reader's position only raises the bound.
func (r *Reader) SetEpoch(start, reserved uint64) {
	r.epochMu.Lock()
	known := false
	for i := range r.starts {
		known = known || r.starts[i].Load() == start
	}
	if !known && start != 0 {
		r.starts[r.nStarts%len(r.starts)].Store(start) // before epochStart: pairs with the Loads in epochAbove
		r.nStarts++
	}
	r.epochMu.Unlock()
	for {
		old := r.epochStart.Load()
		if start <= old || r.epochStart.CompareAndSwap(old, start) {
			break
		}
	}
	for {
		old := r.bound.Load()
		if reserved <= old || r.bound.CompareAndSwap(old, reserved) {
			break
		}
	}
}

// epochAbove is the first epoch start above seq that SetEpoch was told
// (of the last len(starts)), or the newest start if none is above seq.
// One word for the newest start alone is not enough: when two epochs
// begin before the poller passes the first (a home killed, its successor
// stopped at once, the chaos test at load 6-11), a reader waiting in the
// oldest epoch's unused range sees the middle epoch's ticks below the
// newest start and named the unused range a gap or an overrun (up to a
// reservation, ~4 M sequences, more than were ever claimed). Polling
// goroutine; off the hot path (a lapped-looking slot, the idle checks).
func (r *Reader) epochAbove(seq uint64) uint64 {
	es := r.epochStart.Load() // pairs with the CAS in SetEpoch, after the starts' Stores
	if es <= seq {
		return es
	}
	for i := range r.starts {
		if s := r.starts[i].Load(); s > seq && s < es {
			es = s
		}
	}
	return es
}

// AwaitEpoch makes the reader take no stamp ahead of it for a lap until
// SetEpoch gives it a reservation: a reader that knows no epoch yet cannot
// tell a lossy lap from a newer epoch's first ticks, and would name the
// ended epoch's unused range as an overrun (the chaos test saw it on a
// subscriber whose node's JetStream answered seconds late). Until then it
// delivers in order and waits where it would jump. The subscriber calls it
// before Poll runs, since its node always learns the topic's home record.
func (r *Reader) AwaitEpoch() {
	r.bound.CompareAndSwap(0, 1) // no stamp is below 1: none is trusted ahead; pairs with the Load in trusted
}

// trusted reports whether stamp (> seq, in seq's slot at off) can be
// believed: the slot's header check passes for stamp and stamp is below
// the known bound. Off the hot path: only a lapped-looking slot gets here.
func (r *Reader) trusted(off int, stamp uint64) bool {
	if b := r.bound.Load(); b != 0 && stamp >= b { // pairs with the CAS in SetEpoch
		r.stats.untrusted.Add(1)
		return false
	}
	if !slotWhole(r.slots[off:off+r.slotSize], stamp) {
		if stampAt(r.slots, off).Load() == stamp { // not merely being rewritten
			r.stats.untrusted.Add(1)
		}
		return false
	}
	return true
}

// FenceAdd is what FenceCounter adds to a home's counter: every claim
// after it returns a value far above any reservation, so the claimant's
// limit check refuses it (ErrFenced) and it looks for the new home.
const FenceAdd = 1 << 62

// FenceCounter stops a home from granting claims: one fetch-and-add of
// FenceAdd on its counter, through qp (connected to the home's device, its
// send CQ cq), like every other update of the counter, so it holds on a
// NIC whose atomics are atomic only among themselves. The home's owner
// calls it when it loses its lease, before the lease can expire. It
// returns the counter's value before the fence.
func FenceCounter(dev rdma.Device, qp rdma.QueuePair, cq rdma.CompletionQueue, home HomeDesc, timeout time.Duration) (uint64, error) {
	if dev == nil || qp == nil || cq == nil {
		return 0, fmt.Errorf("%w: fence: device, QP and CQ are required", ErrInvalidConfig)
	}
	mr, err := dev.RegisterMemory(8, rdma.AccessLocalWrite)
	if err != nil {
		return 0, fmt.Errorf("ring: fence buffer: %w", err)
	}
	defer mr.Close()
	wr := rdma.WorkRequest{ID: idFence, Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(mr, 0, 8),
		Remote: rdma.RemoteAddr{Addr: home.CounterAddr(), RKey: home.Region.RKey}, Add: FenceAdd}
	if err := qp.PostSend(&wr); err != nil {
		return 0, fmt.Errorf("ring: fence: %w", err)
	}
	var comps [4]rdma.Completion
	deadline := time.Now().Add(timeout)
	for {
		n := cq.Poll(comps[:])
		for i := 0; i < n; i++ {
			if comps[i].ID != idFence {
				continue
			}
			if comps[i].Status != rdma.StatusSuccess {
				return 0, fmt.Errorf("ring: fence: %w", comps[i].Status.Err())
			}
			return binary.LittleEndian.Uint64(mr.Bytes()), nil
		}
		if time.Now().After(deadline) {
			return 0, ErrTimeout
		}
		rdma.Yield{}.Idle(n)
	}
}
