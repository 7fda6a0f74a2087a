package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// journal is a reader's way to the home's journal: three READs per
// sequence (stamp, slot, stamp again), a seqlock read over the wire.
type journal struct {
	qp      rdma.QueuePair
	mr      rdma.MemoryRegion // 8 + slot + 8 bytes
	desc    HomeDesc
	mask    uint64
	base    uint64 // remote address of journal slot 0
	wr      [3]rdma.WorkRequest
	ctr     rdma.WorkRequest // READ of the home's counter
	solo    rdma.WorkRequest // READ of the home's solo word (solo.go), before ctr
	lastCtr int64            // monoNs of the last counter READ
	done    int
	failed  bool
	timeout time.Duration
	// dead: a READ failed or timed out. The reader stops recovering from
	// this journal (what it would have fetched is reported as events) until
	// another is attached: a home that went away must not cost one timeout
	// per missing sequence (up to JournalSlots of them in one Poll).
	dead bool
}

// SetJournal lets the reader recover gaps and overruns from the home's
// journal: qp is a QP on dev connected to the home's device, with
// RingConfig.CQ as its send CQ. The home's slots must hold the ring's.
// Safe while Poll runs: the poller adopts the journal at its next Poll and
// releases the one it replaces (after a failover, the new home's journal
// replaces the old one's; the caller closes the old QP after that).
func (r *Reader) SetJournal(dev rdma.Device, qp rdma.QueuePair, home HomeDesc, timeout time.Duration) error {
	if dev == nil || qp == nil {
		return fmt.Errorf("%w: journal device or QP is nil", ErrInvalidConfig)
	}
	if r.cq == nil {
		return fmt.Errorf("%w: RingConfig.CQ is nil; the journal needs the QP's send CQ", ErrInvalidConfig)
	}
	if err := home.validate(); err != nil {
		return err
	}
	if home.JournalSlots == 0 {
		return fmt.Errorf("%w: the home keeps no journal", ErrInvalidConfig)
	}
	if int(home.SlotSize) > r.slotSize {
		return fmt.Errorf("%w: journal slots of %d bytes do not fit ring slots of %d", ErrInvalidConfig, home.SlotSize, r.slotSize)
	}
	if timeout <= 0 {
		timeout = 100 * time.Millisecond
	}
	mr, err := dev.RegisterMemory(16+int(home.SlotSize), rdma.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("ring: register journal buffer: %w", err)
	}
	j := &journal{qp: qp, mr: mr, desc: home, mask: uint64(home.JournalSlots - 1),
		base: home.Region.Addr + offJournal, timeout: timeout}
	ss := int(home.SlotSize)
	for i, w := range []struct{ local, n int }{{0, 8}, {8, ss}, {8 + ss, 8}} {
		j.wr[i] = rdma.WorkRequest{ID: idRecover, Op: rdma.OpRead, Flags: rdma.FlagSignaled,
			Local: rdma.LocalSGE(mr, w.local, w.n), Remote: rdma.RemoteAddr{RKey: home.Region.RKey}}
	}
	j.ctr = rdma.WorkRequest{ID: idRecover, Op: rdma.OpRead, Flags: rdma.FlagSignaled,
		Local: rdma.LocalSGE(mr, 0, 8), Remote: rdma.RemoteAddr{Addr: home.CounterAddr(), RKey: home.Region.RKey}}
	j.solo = rdma.WorkRequest{ID: idRecover, Op: rdma.OpRead, Flags: rdma.FlagSignaled,
		Local: rdma.LocalSGE(mr, 8, 8), Remote: rdma.RemoteAddr{Addr: home.CounterAddr() + 8, RKey: home.Region.RKey}}
	r.journalMu.Lock()
	defer r.journalMu.Unlock()
	if r.closed.Load() {
		_ = mr.Close()
		return ErrClosed
	}
	if old := r.nextJournal.Swap(j); old != nil && old.mr != nil { // pairs with the Swap in adoptJournal
		_ = old.mr.Close() // never adopted
	}
	return nil
}

// DropJournal detaches the journal at the reader's next Poll: the topic's
// home moved to one whose journal this reader cannot reach, and the old
// home's journal holds nothing of the new epoch (its counter, read for gap
// detection, says nothing of the new home's either). Safe from any
// goroutine.
func (r *Reader) DropJournal() {
	r.journalMu.Lock()
	defer r.journalMu.Unlock()
	if r.closed.Load() {
		return
	}
	if old := r.nextJournal.Swap(&journal{}); old != nil && old.mr != nil { // pairs with the Swap in adoptJournal
		_ = old.mr.Close()
	}
}

// adoptJournal installs the journal SetJournal left (polling goroutine).
func (r *Reader) adoptJournal() {
	r.journalMu.Lock()
	defer r.journalMu.Unlock()
	j := r.nextJournal.Swap(nil) // pairs with the Swap in SetJournal
	if j == nil {
		return
	}
	if old := r.journal; old != nil {
		_ = old.mr.Close()
	}
	r.journal = j
	if j.mr == nil { // DropJournal
		r.journal = nil
	}
}

func (r *Reader) closeJournal() error {
	r.journalMu.Lock()
	defer r.journalMu.Unlock()
	var err error
	if j := r.nextJournal.Swap(nil); j != nil && j.mr != nil {
		err = j.mr.Close()
	}
	if r.journal == nil {
		return err
	}
	return errors.Join(err, r.journal.mr.Close())
}

func (j *journal) complete(c *rdma.Completion) {
	j.done++
	if c.Status != rdma.StatusSuccess {
		j.failed = true
	}
}

// counter READs the home's counter (the next sequence to be claimed),
// at most once per interval; ok is false if it did not (yet) or failed.
// While the home has a solo writer (solo.go) the counter holds the end of
// its run, and the solo word the next sequence it hands out: that one is
// the counter here. The solo word is READ first: Share gives the run's
// tail back (CAS on the counter) before it clears the word, and READs on
// one QP run in order, so a cleared word is never paired with the run's
// end.
func (j *journal) counter(r *Reader, interval int64) (uint64, bool) {
	now := monoNs()
	if now-j.lastCtr < interval {
		return 0, false
	}
	j.lastCtr = now
	j.done, j.failed = 0, false
	if j.dead {
		return 0, false
	}
	if j.qp.PostSend(&j.solo) != nil || j.qp.PostSend(&j.ctr) != nil || !j.wait(r, 2) {
		j.dead = true
		return 0, false
	}
	c := binary.LittleEndian.Uint64(j.mr.Bytes())
	// A solo writer's word is its next sequence while the counter holds
	// its run's end; a fenced counter (FenceCounter) says nothing about
	// what was written, whatever the word says: the fence stays visible.
	if s := binary.LittleEndian.Uint64(j.mr.Bytes()[8:]) &^ soloBusy; s != 0 && s < c && c < FenceAdd {
		c = s
	}
	return c, true
}

// wait reaps until posted completions arrived; false on error or timeout.
func (j *journal) wait(r *Reader, posted int) bool {
	var deadline time.Time
	for j.done < posted {
		r.reap()
		if j.done >= posted {
			break
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(j.timeout)
		} else if time.Now().After(deadline) {
			return false
		}
		rdma.Yield{}.Idle(0)
	}
	return !j.failed
}

// fetch reads seq from the journal into t (t.Payload views the journal
// buffer until the next fetch). It reports whether the journal held seq
// whole.
func (j *journal) fetch(r *Reader, seq uint64, t *Tick) bool {
	ss := uint64(j.desc.SlotSize)
	addr := j.base + (seq&j.mask)*ss
	j.wr[0].Remote.Addr = addr
	j.wr[1].Remote.Addr = addr
	j.wr[2].Remote.Addr = addr
	j.done, j.failed = 0, false
	posted := 0
	for i := range j.wr {
		if j.qp.PostSend(&j.wr[i]) != nil {
			j.failed = true
			break
		}
		posted++
	}
	if !j.wait(r, posted) {
		j.dead = true
		return false
	}
	b := j.mr.Bytes()
	if binary.LittleEndian.Uint64(b[0:]) != seq || binary.LittleEndian.Uint64(b[8+ss:]) != seq {
		return false
	}
	return decodeSlot(b[8:8+ss], seq, t) == slotOK && t.Flags&FlagSkip == 0
}
