package ring

import (
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
