package ring

import "github.com/tickbus/tickbus/rdma"

// poster is the writer's posting part: the WRITE chains of the generic
// path, the completions it reaps, and what a failed QP leaves behind.
// Publishing goroutine only.
type poster struct {
	cq        rdma.CompletionQueue // WriterConfig.CQ: homeQP's send CQ
	signal    uint32               // SignalEvery
	journal   *target              // the home's journal, or nil
	chain     []rdma.WorkRequest   // the WRITEs of one target, posted as one chain
	nchain    int
	comps     [32]rdma.Completion
	pending   int   // signalled WRITEs not yet reaped
	broken    error // ErrHomeFailed once the home's QP (or mapping) failed: every publish returns it
	onDrop    func(uint64, error)
	sweep     bool  // dropped targets wait for the lock to be removed
	flushWant int   // Flush: READs posted
	flushGot  int   // Flush: READs completed
	flushErr  error // Flush: a READ that could not be posted
}

// flow is the writer's flow-control part: the room reliable targets give
// it, cached per target list. Publishing goroutine only.
type flow struct {
	seen  *targetList // the list limit was computed for
	limit uint64      // min over seen's reliable targets of position+slots
}
