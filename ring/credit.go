package ring

import (
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Completion IDs of the requests ring posts.
const (
	idClaim   uint64 = 1 // a writer's CAS or FAA on the counter
	idWrite   uint64 = 2 // a writer's signalled WRITE to a ring or the journal
	idCredit  uint64 = 3 // a reader's signalled credit WRITE
	idRecover uint64 = 4 // a reader's journal READ
	idHead    uint64 = 5 // a writer's READ of a reliable ring's head
	idFlush   uint64 = 6 // a writer's Flush READ
	idFence   uint64 = 7 // FenceCounter's fetch-and-add
)

// credit is a reader's credit cell at one writer (reliable mode).
type credit struct {
	pub    uint32
	qp     rdma.QueuePair
	wr     rdma.WorkRequest // WRITE of 8 inline bytes to the cell
	posts  uint32
	sent   uint64 // last position written; 0 before the first
	failed bool
}

// AddCredit starts writing the reader's consumed position into a writer's
// credit cell (reliable mode): d is what that writer's AddTarget returned
// for this ring, qp a QP of this subscriber connected to the writer's
// device, with RingConfig.CQ as its send CQ. The position is written as
// one 8-byte inline WRITE per writer whenever it moved slots/16 sequences
// since the last, and when the reader goes idle. A second cell for the
// same publisher replaces the first (the caller closes the old QP).
func (r *Reader) AddCredit(qp rdma.QueuePair, d CreditDesc) error {
	if qp == nil {
		return fmt.Errorf("%w: credit QP is nil", ErrInvalidConfig)
	}
	if r.cq == nil {
		return fmt.Errorf("%w: RingConfig.CQ is nil; credits need the QP's send CQ", ErrInvalidConfig)
	}
	if err := d.validate(); err != nil {
		return err
	}
	r.creditMu.Lock()
	defer r.creditMu.Unlock()
	old := *r.credits.Load()
	c := &credit{pub: d.PublisherID, qp: qp, wr: rdma.WorkRequest{ID: idCredit, Op: rdma.OpWrite,
		Remote: rdma.RemoteAddr{Addr: d.Cell.Addr, RKey: d.Cell.RKey}}}
	// A cell for a publisher that already has one replaces it: the writer
	// dropped this ring and added it again (a partition, a failed QP), so
	// the old cell is no longer read, and may be handed to another ring.
	// Keeping the old one would write this reader's position into a cell
	// the writer no longer reads, or into another ring's.
	next := make([]*credit, 0, len(old)+1)
	for _, o := range old {
		if o.pub != d.PublisherID {
			next = append(next, o)
		}
	}
	next = append(next, c)
	r.credits.Store(&next) // pairs with the Load in sendCredits
	r.log.Debug().Uint32("publisher", d.PublisherID).Msg("ring: credit added")
	return nil
}

// RemoveCredit stops writing credits to a writer.
func (r *Reader) RemoveCredit(publisherID uint32) error {
	r.creditMu.Lock()
	defer r.creditMu.Unlock()
	old := *r.credits.Load()
	next := make([]*credit, 0, len(old))
	for _, c := range old {
		if c.pub != publisherID {
			next = append(next, c)
		}
	}
	if len(next) == len(old) {
		return fmt.Errorf("%w: credit for publisher %d", ErrNoTarget, publisherID)
	}
	r.credits.Store(&next) // pairs with the Load in sendCredits
	return nil
}

// GrantCredit gives qp, a queue pair on dev (the device of the target whose
// cell d is, as AddTarget returned it), write access to that one cell and
// nothing else of the writer's memory: a reliable subscriber's credit QP
// (confined, granted before it connects) cannot touch another subscriber's
// cell. Each cell is a grant unit of its own (creditStride), so on shm
// the peer is handed only its own cell's page, and cannot map another's
// even if it tries. It returns the CreditDesc to hand the subscriber: the cell as the
// grant names it (on verbs a memory window's rkey). On a device that cannot
// confine a queue pair (rdma.ErrNotSupported) it returns d: every queue
// pair of the device reaches every cell there.
func (w *Writer) GrantCredit(qp rdma.QueuePair, dev rdma.Device, d CreditDesc) (CreditDesc, error) {
	if err := d.validate(); err != nil {
		return CreditDesc{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return CreditDesc{}, ErrClosed
	}
	regs := w.regs[dev]
	if regs == nil || d.PublisherID != w.pub || d.Epoch != w.epoch {
		return CreditDesc{}, fmt.Errorf("%w: credit cell of publisher %d epoch %#x is not this writer's (%d, %#x) on %s",
			ErrNoTarget, d.PublisherID, d.Epoch, w.pub, w.epoch, dev.Provider())
	}
	base := regs.credits.Remote()
	off := d.Cell.Addr - base.Addr
	stride := uint64(creditStride)
	if d.Cell.RKey != base.RKey || d.Cell.Addr < base.Addr || off%stride != 0 || off >= base.Len {
		return CreditDesc{}, fmt.Errorf("%w: credit cell at %#x rkey %#x is not one of this writer's on %s", ErrNoTarget, d.Cell.Addr, d.Cell.RKey, dev.Provider())
	}
	inUse := false
	for _, t := range w.targets.Load().all {
		inUse = inUse || (t.cell != nil && t.cellIdx == int(off/stride))
	}
	if !inUse {
		return CreditDesc{}, fmt.Errorf("%w: credit cell %d is no target's", ErrNoTarget, off/stride)
	}
	rr, err := qp.GrantRange(regs.credits, int(off), 8, rdma.AccessRemoteWrite)
	if errors.Is(err, rdma.ErrNotSupported) {
		return d, nil
	}
	if err != nil {
		return CreditDesc{}, fmt.Errorf("ring: grant credit cell %d to QP %d: %w", off/stride, qp.Num(), err)
	}
	d.Cell = rr
	return d, nil
}
