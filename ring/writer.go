package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// ClaimMode is how a writer claims sequences on the home's counter.
type ClaimMode uint8

const (
	// ClaimCAS claims with compare-and-swap from the writer's cached counter
	// value: one round trip for a lone publisher, a retry per lost race
	// when several share the topic. Default.
	ClaimCAS ClaimMode = iota + 1
	// ClaimFAA claims with fetch-and-add: one round trip however many
	// publishers share the topic.
	ClaimFAA
)

func (m ClaimMode) String() string {
	switch m {
	case ClaimCAS:
		return "cas"
	case ClaimFAA:
		return "faa"
	}
	return fmt.Sprintf("ClaimMode(%d)", uint8(m))
}

// ParseClaimMode reads "cas" or "faa".
func ParseClaimMode(s string) (ClaimMode, error) {
	switch s {
	case "cas", "":
		return ClaimCAS, nil
	case "faa":
		return ClaimFAA, nil
	}
	return 0, fmt.Errorf("%w: claim mode %q, want cas or faa", ErrInvalidConfig, s)
}

// WriterConfig configures a publisher's writer on one topic.
type WriterConfig struct {
	// Device is the writer's device: its staging memory and credit cells are
	// registered there. Required.
	Device rdma.Device
	// CQ is the send CQ of HomeQP, and of every target QP added without one
	// of its own. The writer alone polls it. Required.
	CQ rdma.CompletionQueue
	// HomeQP is connected to a QP on the home's device; on the home's own
	// host it is a loopback QP. Claims and journal writes go through it.
	// Required.
	HomeQP rdma.QueuePair
	// Home is the topic's home descriptor. Required.
	Home HomeDesc
	// PublisherID is stamped on every tick this writer publishes.
	PublisherID uint32
	// Claim is ClaimCAS (default) or ClaimFAA.
	Claim ClaimMode
	// MaxPayload bounds a payload; default and maximum: the home's slot.
	MaxPayload int
	// MaxBatch bounds PublishBatch. Default 64.
	MaxBatch int
	// StagingSlots is how many ticks the writer stages before it reuses a
	// staging slot (rounded up to a power of two); it must exceed the send
	// depth of every QP plus MaxBatch, so a staged tick is never rewritten
	// before the device has read it. Default 1024.
	StagingSlots int
	// SignalEvery: one WRITE in this many per QP is signalled; keep it at
	// most half the QPs' send depth. Default 16.
	SignalEvery int
	// MaxTargets bounds the reliable targets (credit cells), 1..MaxCreditCells.
	// Each cell is a page of its own (a grant unit: see ring/doc.go). Default 64.
	MaxTargets int
	// Timeout bounds every wait: a claim's completion (ErrTimeout), room at
	// reliable subscribers (ErrBackPressure), a full send queue. Default 1s.
	Timeout time.Duration
	// ArbitrationWindow is how long PublishAt waits for the other line when
	// its sequence is ahead of the counter, before it declares the sequences
	// in between missing (EventSkip). Default 1ms; negative: do not wait.
	ArbitrationWindow time.Duration
	// Idle is what the writer does while it waits. Default rdma.Yield{}.
	Idle rdma.IdleStrategy
	// Generic forces the work-request path (claims and WRITEs through QPs
	// and their completions) even where a QP maps its peer's memory
	// directly (rdma.DirectMapper, see direct.go). For comparisons and
	// tests; false in production.
	Generic bool
	// SoloHome is the topic's home when it lives in this process and this
	// writer is its only publisher: the writer then reserves runs of
	// sequences ahead and claims within them with plain loads and stores
	// instead of a locked CAS/FAA per claim (solo.go), until
	// SoloHome.Share, which the home's owner must call before it grants
	// its counter to a publisher of another process (a writer made in
	// this process on the same home Shares it itself). Used only on the
	// direct path where membarrier(2) works, for the first writer of the
	// home; ignored otherwise, or if Home is not SoloHome's descriptor.
	SoloHome *Home
	// OnTargetDropped, if set, is called (on the publishing goroutine) when
	// a target's QP fails and the writer drops it.
	OnTargetDropped func(id uint64, err error)
	Logger          zerolog.Logger
}

func (c *WriterConfig) setDefaults() error {
	switch {
	case c.Device == nil:
		return fmt.Errorf("%w: WriterConfig.Device is nil", ErrInvalidConfig)
	case c.CQ == nil:
		return fmt.Errorf("%w: WriterConfig.CQ is nil", ErrInvalidConfig)
	case c.HomeQP == nil:
		return fmt.Errorf("%w: WriterConfig.HomeQP is nil", ErrInvalidConfig)
	}
	if err := c.Home.validate(); err != nil {
		return fmt.Errorf("%w: WriterConfig.Home: %w", ErrInvalidConfig, err)
	}
	if c.Device.Caps().Atomic == rdma.AtomicNone {
		return fmt.Errorf("%w: %s device on %s cannot claim sequences", ErrDeviceAtomics, c.Device.Provider(), c.Device.HostID())
	}
	if c.Claim == 0 {
		c.Claim = ClaimCAS
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = c.Home.MaxPayload()
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 64
	}
	if c.StagingSlots == 0 {
		c.StagingSlots = 1024
	}
	if c.SignalEvery == 0 {
		c.SignalEvery = 16
	}
	if c.MaxTargets == 0 {
		c.MaxTargets = 64
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	if c.ArbitrationWindow == 0 {
		c.ArbitrationWindow = time.Millisecond
	}
	if c.Idle == nil {
		c.Idle = rdma.Yield{}
	}
	switch {
	case c.Claim != ClaimCAS && c.Claim != ClaimFAA:
		return fmt.Errorf("%w: Claim %d, want ClaimCAS or ClaimFAA", ErrInvalidConfig, c.Claim)
	case c.MaxPayload < 0 || c.MaxPayload > c.Home.MaxPayload():
		return fmt.Errorf("%w: MaxPayload %d, want 0..%d (the home's slot)", ErrInvalidConfig, c.MaxPayload, c.Home.MaxPayload())
	case c.MaxBatch < 1 || c.MaxBatch > 1<<16:
		return fmt.Errorf("%w: MaxBatch %d, want 1..65536", ErrInvalidConfig, c.MaxBatch)
	case c.StagingSlots < 2*c.MaxBatch || c.StagingSlots > 1<<20:
		return fmt.Errorf("%w: StagingSlots %d, want %d (2×MaxBatch)..%d", ErrInvalidConfig, c.StagingSlots, 2*c.MaxBatch, 1<<20)
	case c.SignalEvery < 1 || c.SignalEvery > 1<<16:
		return fmt.Errorf("%w: SignalEvery %d, want 1..65536", ErrInvalidConfig, c.SignalEvery)
	case c.MaxTargets < 1 || c.MaxTargets > MaxCreditCells:
		return fmt.Errorf("%w: MaxTargets %d, want 1..%d", ErrInvalidConfig, c.MaxTargets, MaxCreditCells)
	case c.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v, want > 0", ErrInvalidConfig, c.Timeout)
	}
	return nil
}

// Target is one subscriber ring a writer writes into.
type Target struct {
	// ID names the target for RemoveTarget and OnTargetDropped.
	ID uint64
	// QP is connected to a QP on the subscriber's device.
	QP rdma.QueuePair
	// Device is the device QP belongs to, if not WriterConfig.Device (a
	// writer may reach local subscribers through shm and remote ones
	// through tcp or verbs). The writer registers its staging memory and
	// credit cells on it too.
	Device rdma.Device
	// CQ is QP's send CQ, if not WriterConfig.CQ. The writer polls it.
	CQ rdma.CompletionQueue
	// Ring is the subscriber ring's descriptor.
	Ring RingDesc
}

// target is the writer's view of one ring (or of the journal).
type target struct {
	id       uint64
	qp       rdma.QueuePair
	bp       rdma.BatchPoster // qp, if it posts chains in one call
	sp       slotPoster       // qp, if it takes a slot's WRITEs in one call (writer_slot.go)
	cq       rdma.CompletionQueue
	qpn      uint32
	rkey     uint32
	lkey     uint32 // staging lkey on the QP's device
	base     uint64 // remote address of slot 0
	mask     uint64
	slotSize uint64
	slots    uint64
	lossy    bool
	journal  bool
	cell     *creditCell // reliable only: the reader's position, written by the reader
	head     uint64      // reliable only: the ring's head as last READ
	cellSeen uint64      // reliable, head not mapped: the cell's value roomFor last saw (headDue)
	cellAt   int64       // monoNs when cellSeen changed, or of the last head READ
	stuckAt  uint64      // reliable only: the position a publish without room saw (unstick)
	cellIdx  int
	posts    uint32
	dropped  bool           // publishing goroutine only
	dm       rdma.DirectMap // the mapped ring (direct.go), or nil: written through qp
	dmem     []byte         // dm's bytes: slot 0 first
	live     liveness       // dm's Live, behind its provider's counter (direct.go)
	hm       rdma.DirectMap // reliable, direct: the ring's mapped head word (readHead), or nil: READ through qp
	dhead    *uint64        // hm's word
}

// targetList is immutable once published; AddTarget and RemoveTarget swap
// in a new one.
type targetList struct {
	all      []*target
	reliable int
	direct   bool                   // the journal (if any) and every target are mapped: Publish and PublishBatch write without staging (direct.go)
	rings    []*target              // direct only: every target, then the journal (if any); what the lean path writes (writer_lean.go, mappedRings)
	cqs      []rdma.CompletionQueue // distinct, WriterConfig.CQ first
}

// devRegs is the writer's memory registered on one device.
type devRegs struct {
	staging rdma.MemoryRegion
	credits rdma.MemoryRegion
}

// Writer publishes ticks on one topic: it claims sequences at the home and
// writes each tick into the journal and every target ring, all through
// queue pairs. One goroutine publishes; AddTarget, RemoveTarget and Stats
// may be called from others; Close once publishing has stopped.
type Writer struct {
	_ [LineSize]byte
	// Publishing goroutine only, by role.
	claimer
	waiter
	staging
	poster
	flow
	_ [LineSize]byte

	targets  atomic.Pointer[targetList]
	stats    writerStats
	fence    atomic.Uint64 // SetLimit; the hot path loads it once per claim (epoch.go)
	lease    atomic.Int64  // SetLeaseEnd: monoNs from which no claim is written; 0 none (epoch.go)
	leaseTSC atomic.Int64  // SetLeaseEnd: the TSC before which the lease surely holds; 0: read the clock (leaseclock.go)
	leaseGen atomic.Uint64 // SetLeaseEnd: odd while it updates lease and leaseTSC (tscLearn)
	retire   atomic.Bool   // retired holds mappings to release (begin)

	// Control plane.
	mu        sync.Mutex
	dev       rdma.Device
	regs      map[rdma.Device]*devRegs
	cells     *rdma.Memory // the credit cells, one grant unit each, registered on every device
	cellsMem  []byte
	cellsFree []int
	nCells    int
	epoch     uint64
	log       zerolog.Logger
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	direct    bool             // map targets directly when their QP can (not Generic)
	retired   []rdma.DirectMap // mappings of removed targets, released by the publishing goroutine
}

// writerStats: the publishing goroutine Adds (uncontended; published, the
// one per publish, with addOwn); every Add pairs with the Load in Stats.
type writerStats struct {
	_            [LineSize]byte
	published    atomic.Uint64
	casRetries   atomic.Uint64
	lost         atomic.Uint64
	skipped      atomic.Uint64
	backPressure atomic.Uint64
	dropped      atomic.Uint64
	_            [LineSize]byte
}

// WriterStats are a writer's counters.
type WriterStats struct {
	Published    uint64 // sequences claimed and written (batches count each tick)
	CASRetries   uint64 // CAS claims that lost a race and retried
	Lost         uint64 // PublishAt calls that lost the arbitration
	Skipped      uint64 // sequences PublishAt declared missing
	BackPressure uint64 // publishes that returned ErrBackPressure
	Dropped      uint64 // targets dropped after a QP error
	Targets      int    // targets now
	Direct       int    // targets now written through a direct mapping (direct.go)
	DirectClaim  bool   // claims are CPU atomics on the mapped home counter
	Solo         bool   // claims come from runs reserved ahead, with no locked op each (solo.go)
}

// Staging memory layout.
const (
	stgResult = 0  // 8 bytes: the original value of a claim's CAS/FAA
	stgBusy   = 8  // 8 bytes: StampBusy, the source of lossy invalidations
	stgHead   = 16 // 8 bytes: a reliable ring's head, READ when it looks full
	stgStamps = LineSize
	// Then one u64 per staging slot (the source of its stamp WRITE), then
	// the slot images at stgImages: each is a whole slot whose stamp field
	// holds StampBusy, so a run of consecutive slots can go in one WRITE
	// that leaves every stamp it covers invalid (see writeRun).
)

func stgImagesOff(n uint64) int { return stgStamps + (int(n)*8+63)&^63 }

// NewWriter makes a writer. It registers its staging memory and credit
// cells on cfg.Device.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	stgSlot := (SlotHeaderSize + cfg.MaxPayload + SlotAlign - 1) &^ (SlotAlign - 1) // a ring slot of the same size is one run of a batch (bulk)
	w := &Writer{
		claimer: claimer{homeQP: cfg.HomeQP, homeQPN: cfg.HomeQP.Num(),
			counter:  rdma.RemoteAddr{Addr: cfg.Home.CounterAddr(), RKey: cfg.Home.Region.RKey},
			cached:   cfg.Home.Start,
			faa:      cfg.Claim == ClaimFAA,
			homeDesc: cfg.Home},
		waiter: waiter{idle: cfg.Idle, timeoutNs: int64(cfg.Timeout), arbNs: int64(cfg.ArbitrationWindow)},
		staging: staging{pub: cfg.PublisherID, maxPayload: cfg.MaxPayload, maxBatch: cfg.MaxBatch,
			stgSlot:   stgSlot,
			stgN:      uint64(pow2Ceil(cfg.StagingSlots)),
			batchOffs: make([]int, cfg.MaxBatch+1),
			batchLens: make([]uint32, cfg.MaxBatch+1),
			batchSeqs: make([]uint64, cfg.MaxBatch+1)},
		poster: poster{cq: cfg.CQ, signal: uint32(cfg.SignalEvery), onDrop: cfg.OnTargetDropped,
			chain: make([]rdma.WorkRequest, 3*(cfg.MaxBatch+1))},
		dev:    cfg.Device,
		regs:   make(map[rdma.Device]*devRegs),
		nCells: cfg.MaxTargets,
		epoch:  newEpoch(),
		log:    cfg.Logger,
	}
	w.fence.Store(^uint64(0)) // no limit until SetLimit (epoch.go)
	if w.arbNs < 0 {
		w.arbNs = 0
	}
	regs, err := w.registerOn(cfg.Device)
	if err != nil {
		return nil, err
	}
	w.stg = regs.staging.Bytes()
	w.stgAddr = regs.staging.Addr()
	w.lkey = regs.staging.LKey()
	w.cellsMem = w.cells.Bytes()
	binary.LittleEndian.PutUint64(w.stg[stgBusy:], StampBusy)
	w.stgImages = stgImagesOff(w.stgN)
	w.bulk = cfg.Device.Caps().MaxMsgSize >= cfg.MaxBatch*w.stgSlot
	for i := cfg.MaxTargets - 1; i >= 0; i-- {
		w.cellsFree = append(w.cellsFree, i)
	}
	if cfg.Home.JournalSlots > 0 {
		w.journal = &target{id: ^uint64(0), qp: cfg.HomeQP, cq: cfg.CQ, qpn: w.homeQPN, rkey: cfg.Home.Region.RKey,
			lkey: regs.staging.LKey(), base: cfg.Home.Region.Addr + offJournal, mask: uint64(cfg.Home.JournalSlots - 1),
			slotSize: uint64(cfg.Home.SlotSize), slots: uint64(cfg.Home.JournalSlots), lossy: true, journal: true}
		w.journal.bp, _ = cfg.HomeQP.(rdma.BatchPoster)
	}
	w.mapHome(&cfg)
	w.armSolo(cfg.SoloHome)
	w.direct = !cfg.Generic
	w.bodies = make([]slotBody, cfg.MaxBatch+1)
	w.targets.Store(&targetList{cqs: []rdma.CompletionQueue{cfg.CQ}, direct: w.allDirect(nil), rings: w.mappedRings(nil)}) // pairs with the Load in begin and reap
	w.log.Debug().Uint32("publisher", w.pub).Stringer("claim", cfg.Claim).Msg("ring: writer ready")
	return w, nil
}

// registerOn registers (once per device) the staging memory and the credit
// cells; on the first device it allocates them, on others it registers the
// same memory. Called with mu held, or before the writer is shared.
func (w *Writer) registerOn(dev rdma.Device) (*devRegs, error) {
	if r, ok := w.regs[dev]; ok {
		return r, nil
	}
	stgSize := stgImagesOff(w.stgN) + int(w.stgN)*w.stgSlot
	var r devRegs
	var err error
	if len(w.regs) == 0 {
		if r.staging, err = dev.RegisterMemory(stgSize, rdma.AccessLocalWrite); err != nil {
			return nil, fmt.Errorf("ring: register staging of %d bytes: %w", stgSize, err)
		}
		// The cells, each a page of its own, backed as a grant unit of
		// its own, so the credit QP granted one cell can map no other
		// (rdma.MemoryConfig): registered alike on every device.
		if w.cells, err = rdma.AllocMemory("credit-cells", w.maxTargets()*creditStride,
			rdma.MemoryConfig{GrantUnit: creditStride, GrantUnits: w.maxTargets()}); err != nil {
			_ = r.staging.Close()
			return nil, fmt.Errorf("ring: allocate credit cells: %w", err)
		}
		if r.credits, err = dev.Register(w.cells.Bytes(), rdma.AccessLocalWrite|rdma.AccessRemoteWrite); err != nil {
			_ = r.staging.Close()
			_ = w.cells.Close()
			return nil, fmt.Errorf("ring: register credit cells: %w", err)
		}
	} else {
		if r.staging, err = dev.Register(w.stg[:stgSize], rdma.AccessLocalWrite); err != nil {
			return nil, fmt.Errorf("ring: register staging on %s: %w", dev.Provider(), err)
		}
		if r.credits, err = dev.Register(w.cellsMem, rdma.AccessLocalWrite|rdma.AccessRemoteWrite); err != nil {
			_ = r.staging.Close()
			return nil, fmt.Errorf("ring: register credit cells on %s: %w", dev.Provider(), err)
		}
	}
	w.regs[dev] = &r
	return &r, nil
}

func (w *Writer) maxTargets() int { return w.nCells }

// AddTarget starts writing into a subscriber's ring. For a reliable ring it
// returns the credit cell the subscriber must write its position into
// (Reader.AddCredit); for a lossy ring the CreditDesc is zero. Safe while
// another goroutine publishes: the next publish writes to the new target.
func (w *Writer) AddTarget(t Target) (CreditDesc, error) {
	if t.QP == nil {
		return CreditDesc{}, fmt.Errorf("%w: target %d QP is nil", ErrInvalidConfig, t.ID)
	}
	if err := t.Ring.validate(); err != nil {
		return CreditDesc{}, fmt.Errorf("%w: target %d ring: %w", ErrInvalidConfig, t.ID, err)
	}
	if t.Ring.MaxPayload() < w.maxPayload {
		return CreditDesc{}, fmt.Errorf("%w: target %d ring slots hold %d bytes of payload, the writer publishes up to %d",
			ErrInvalidConfig, t.ID, t.Ring.MaxPayload(), w.maxPayload)
	}
	if t.Device == nil {
		t.Device = w.dev
	}
	if t.CQ == nil {
		t.CQ = w.cq
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return CreditDesc{}, ErrClosed
	}
	old := w.targets.Load()
	for _, o := range old.all {
		if o.id == t.ID {
			return CreditDesc{}, fmt.Errorf("%w: %d", ErrTargetExists, t.ID)
		}
	}
	regs, err := w.registerOn(t.Device)
	if err != nil {
		return CreditDesc{}, err
	}
	nt := &target{id: t.ID, qp: t.QP, cq: t.CQ, qpn: t.QP.Num(), rkey: t.Ring.Region.RKey, lkey: regs.staging.LKey(),
		base: t.Ring.Region.Addr + offSlots, mask: uint64(t.Ring.Slots - 1), slotSize: uint64(t.Ring.SlotSize),
		slots: uint64(t.Ring.Slots), lossy: t.Ring.Mode == Lossy, cellIdx: -1}
	nt.bp, _ = t.QP.(rdma.BatchPoster)
	nt.sp, _ = t.QP.(slotPoster)
	w.mapTarget(nt)
	var cd CreditDesc
	if t.Ring.Mode == Reliable {
		if len(w.cellsFree) == 0 {
			closeDirect(nt)
			return CreditDesc{}, fmt.Errorf("%w: %d in use", ErrNoCreditCell, w.maxTargets())
		}
		// t.QP's peer gets no credit cell: the subscriber writes its
		// position over a queue pair of its own, granted its cell only
		// (GrantCredit).
		nt.cellIdx = w.cellsFree[len(w.cellsFree)-1]
		w.cellsFree = w.cellsFree[:len(w.cellsFree)-1]
		nt.cell = at[creditCell](w.cellsMem, nt.cellIdx*creditStride)
		// Before the target is published and before the subscriber learns
		// the cell: the ring's reader starts at Start.
		nt.cell.Next.Store(t.Ring.Start) // pairs with the writer's Load in computeLimit
		cell := regs.credits.Remote()
		cd = CreditDesc{PublisherID: w.pub, Epoch: w.epoch, Cell: rdma.RemoteRegion{
			Addr: cell.Addr + uint64(nt.cellIdx*creditStride), RKey: cell.RKey, Len: 8}}
	}
	nl := &targetList{all: append(append(make([]*target, 0, len(old.all)+1), old.all...), nt), reliable: old.reliable}
	if nt.cell != nil {
		nl.reliable++
	}
	nl.cqs = distinctCQs(w.cq, nl.all)
	nl.direct = w.allDirect(nl.all)
	nl.rings = w.mappedRings(nl.all)
	w.targets.Store(nl) // pairs with the Load at the start of every publish
	w.log.Debug().Uint64("target", t.ID).Stringer("mode", t.Ring.Mode).Msg("ring: target added")
	return cd, nil
}

func distinctCQs(first rdma.CompletionQueue, ts []*target) []rdma.CompletionQueue {
	cqs := []rdma.CompletionQueue{first}
outer:
	for _, t := range ts {
		for _, c := range cqs {
			if c == t.cq {
				continue outer
			}
		}
		cqs = append(cqs, t.cq)
	}
	return cqs
}

// RemoveTarget stops writing into a target's ring. A publish already under
// way may still write to it; close its QP only after RemoveTarget returns.
func (w *Writer) RemoveTarget(id uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.removeLocked(id, nil) {
		return fmt.Errorf("%w: %d", ErrNoTarget, id)
	}
	w.log.Debug().Uint64("target", id).Msg("ring: target removed")
	return nil
}

// removeLocked removes target id (only if it is the target only, when only
// is not nil). Called with mu held.
func (w *Writer) removeLocked(id uint64, only *target) bool {
	old := w.targets.Load()
	nl := &targetList{all: make([]*target, 0, len(old.all))}
	var gone *target
	for _, t := range old.all {
		if t.id == id && (only == nil || t == only) {
			gone = t
			continue
		}
		nl.all = append(nl.all, t)
		if t.cell != nil {
			nl.reliable++
		}
	}
	if gone == nil {
		return false
	}
	nl.cqs = distinctCQs(w.cq, nl.all)
	nl.direct = w.allDirect(nl.all)
	nl.rings = w.mappedRings(nl.all)
	w.targets.Store(nl) // pairs with the Load at the start of every publish
	if gone.cellIdx >= 0 {
		w.cellsFree = append([]int{gone.cellIdx}, w.cellsFree...) // reused last
	}
	if gone.dm != nil {
		// A publish under way may still write it: released at the start
		// of the next one (begin), or by Close.
		w.retired = append(w.retired, gone.dm)
		if gone.hm != nil {
			w.retired = append(w.retired, gone.hm)
		}
		w.retire.Store(true) // pairs with the Load in begin
	}
	return true
}

// closeDirect releases the mapping of a target that was never published.
func closeDirect(t *target) {
	if t.dm != nil {
		_ = t.dm.Close()
		t.dm, t.dmem = nil, nil
	}
	if t.hm != nil {
		_ = t.hm.Close()
		t.hm, t.dhead = nil, nil
	}
}

// Stats returns the counters; safe from any goroutine.
func (w *Writer) Stats() WriterStats {
	tl := w.targets.Load()
	direct := 0
	for _, t := range tl.all {
		if t.dm != nil {
			direct++
		}
	}
	return WriterStats{
		Direct:       direct,
		DirectClaim:  w.dctr != nil,
		Solo:         w.soloHome != nil && w.soloHome.solo.armed.Load() && w.soloHome.solo.req.Load() == 0,
		Published:    w.stats.published.Load(),
		CASRetries:   w.stats.casRetries.Load(),
		Lost:         w.stats.lost.Load(),
		Skipped:      w.stats.skipped.Load(),
		BackPressure: w.stats.backPressure.Load(),
		Dropped:      w.stats.dropped.Load(),
		Targets:      len(tl.all),
	}
}

// Close stops the writer (later publishes return ErrClosed) and deregisters
// its memory. QPs and CQs belong to the caller. Do not Close while a publish
// runs. Idempotent.
func (w *Writer) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.closed.Store(true) // pairs with the Load in begin
		if w.soloHome != nil {
			w.soloHome.Share() // the run's unused tail goes back
		}
		for _, t := range w.targets.Load().all {
			if t.dm != nil {
				_ = t.dm.Close()
			}
			if t.hm != nil {
				_ = t.hm.Close()
			}
		}
		if j := w.journal; j != nil && j.dm != nil {
			_ = j.dm.Close()
		}
		if w.dhome != nil {
			_ = w.dhome.Close()
		}
		w.releaseRetired()
		var errs []error
		for dev, r := range w.regs {
			if dev != w.dev {
				errs = append(errs, r.staging.Close(), r.credits.Close())
			}
		}
		if r := w.regs[w.dev]; r != nil {
			errs = append(errs, r.staging.Close(), r.credits.Close())
		}
		if w.cells != nil {
			errs = append(errs, w.cells.Close()) // after every region on it
		}
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

func pow2Ceil(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
