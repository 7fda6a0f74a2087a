package ring

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// Reader polls one ring. It is not safe for concurrent Poll calls; AddCredit,
// RemoveCredit, SetJournal and Stats may be called from any goroutine.
//
// Receive rule, for next = the sequence the reader waits for, and stamp =
// slot[next & mask].stamp:
//
//	stamp == next        → a complete tick: deliver (lossy: copy, re-check
//	                       the stamp, deliver the copy only if unchanged)
//	stamp > next, same slot → lapped: recover what the journal holds,
//	                       EventOverrun for the rest, resume at stamp-slots+1
//	otherwise            → not written yet; if later sequences are present
//	                       for GapTimeout, recover or EventGap
type Reader struct {
	// Hot fields: the polling goroutine only.
	mem      []byte // the whole ring region
	slots    []byte // mem[offSlots:]
	head     *atomic.Uint64
	mask     uint64
	slotSize int
	lossy    bool
	next     uint64
	maxBatch int
	batch    []Tick
	scratch  []byte // lossy: one validated copy per batch entry

	// Gap detection (idle path).
	gapTimeout int64
	idle       uint32
	gapFrom    uint64
	gapLimit   uint64
	gapSince   int64
	lastScan   int64
	// A scan for later sequences under way (scanEnd != 0): the next slot
	// to look at, the end, and the next it was begun for. The scan is
	// spread over the idle checks its cadence holds (scanStep); lastIdle
	// is the previous idle check's clock reading, which tells how many.
	scanAt, scanEnd, scanFor uint64
	lastIdle                 int64
	// below, if set, watches the sequences under a held reader's start
	// for ticks that land late (WatchBelow, below.go).
	below *below

	// ReadInto's handler, preallocated.
	into intoHandler

	// Credits (reliable mode): the list is copy-on-write.
	creditMu  sync.Mutex
	credits   atomic.Pointer[[]*credit]
	creditBuf [8]byte
	cq        rdma.CompletionQueue
	comps     [16]rdma.Completion
	signaled  int // signalled requests not yet reaped
	// creditEvery: a credit WRITE once the position moved this far (slots/16),
	// or when the reader goes idle.
	creditEvery uint64
	creditAt    int64 // monoNs of the idle path's last credit WRITEs
	journal     *journal
	nextJournal atomic.Pointer[journal] // set by SetJournal, adopted by Poll
	journalMu   sync.Mutex              // SetJournal, adoptJournal, closeJournal
	log         zerolog.Logger
	closed      atomic.Bool
	stats       readerStats
	recovering  bool
	// pend is an event not yet handed out: adjacent events of one kind
	// within a poll merge into one (a reader lapped repeatedly while it
	// catches up reports one overrun range, not one event per sequence).
	pend Event
	// fence is the reader's own word for loadFence (unused on amd64).
	fence atomic.Uint64
	// Epochs (epoch.go): the newest epoch's first sequence and the newest
	// reservation, set by SetEpoch from any goroutine.
	epochStart atomic.Uint64
	bound      atomic.Uint64
	// starts holds the last len(starts) epoch starts SetEpoch was told
	// (epochMu orders SetEpoch's writers; the poller only loads), so that
	// an epoch that began and ended before the poller reached it still
	// ends the one below it (epochAbove).
	starts   [8]atomic.Uint64
	nStarts  int // epochMu
	epochMu  sync.Mutex
	gapEpoch bool // the pending gap check ends at an epoch start
	// gapSeen is the last sequence present when the pending gap check
	// began; gapHorizon the largest gapSeen of a gap that fired. A hole
	// below the horizon was claimed before a sequence that was written a
	// gap timeout ago, so it is reported at once, without a timeout of its
	// own: a reader joining interleaved publishers (one hole per sequence
	// another publisher claimed before it added the ring) never stalls
	// them one gap timeout per hole.
	gapSeen    uint64
	gapHorizon uint64
	gapFires   uint64 // gap timeouts that fired (polling goroutine; tests)
	// claimed: every sequence below it was claimed (SetClaimed, any
	// goroutine): a gap check that finds nothing later in the ring waits
	// for up to it (claimed.go).
	claimed atomic.Uint64
}

// readerStats: the polling goroutine Adds (uncontended, once per batch or
// event; delivered, the one per batch, with addOwn); every Add pairs with
// the Load in Stats.
type readerStats struct {
	_         [LineSize]byte
	delivered atomic.Uint64
	gap       atomic.Uint64
	overrun   atomic.Uint64
	corrupt   atomic.Uint64
	skip      atomic.Uint64
	recovered atomic.Uint64
	creditErr atomic.Uint64
	torn      atomic.Uint64
	epoch     atomic.Uint64
	untrusted atomic.Uint64
	// belowStart: the watch's (below.go), not part of the invariant
	belowStart atomic.Uint64
	_          [LineSize]byte
}

// ReaderStats are a reader's counters, in sequences. Delivered + Gap +
// Overrun + Corrupt + Skip + Epoch == Next - Start: every sequence passed
// is accounted for. Recovered (from the journal) is part of Delivered.
type ReaderStats struct {
	Next         uint64 // the next sequence the reader waits for
	Delivered    uint64
	Gap          uint64
	Overrun      uint64
	Corrupt      uint64
	Skip         uint64
	Recovered    uint64
	CreditErrors uint64 // credit writes that failed (the credit was dropped)
	// Torn counts lossy copies thrown away because the slot was rewritten
	// while the reader copied it (never delivered; the overrun that follows
	// accounts for the sequence).
	Torn uint64
	// Epoch counts sequences an ended epoch reserved and never wrote here
	// (EventEpoch): a failover passed over them.
	Epoch uint64
	// Untrusted counts stamps ahead of the reader that failed their header
	// check or the bound (never acted on; see epoch.go).
	Untrusted uint64
	// BelowStart counts ticks that landed below the start StartAt moved
	// the reader to, after it did (WatchBelow): claimed before the start,
	// still in flight when it was chosen. Never delivered, and outside
	// the invariant above (they are below Start).
	BelowStart uint64
}

func newReader(mem []byte, cfg *RingConfig) *Reader {
	r := &Reader{
		mem:         mem,
		slots:       mem[offSlots:],
		head:        &at[hotLine](mem, offHot).Value,
		mask:        uint64(cfg.Slots - 1),
		slotSize:    cfg.SlotSize,
		lossy:       cfg.Mode == Lossy,
		next:        cfg.Start,
		maxBatch:    cfg.MaxBatch,
		batch:       make([]Tick, cfg.MaxBatch),
		gapTimeout:  int64(cfg.GapTimeout),
		creditEvery: uint64(max(1, cfg.Slots/16)),
		cq:          cfg.CQ,
		log:         cfg.Logger,
	}
	if r.lossy {
		r.scratch = make([]byte, cfg.MaxBatch*cfg.SlotSize)
	}
	r.head.Store(r.next) // pairs with observers' loads (Head)
	empty := []*credit{}
	r.credits.Store(&empty) // pairs with the Load in sendCredits
	return r
}

// Next is the sequence the reader waits for.
func (r *Reader) Next() uint64 { return r.next }

// Head is the reader's position as published in the ring header, safe to
// call from any goroutine.
func (r *Reader) Head() uint64 { return r.head.Load() } // pairs with the Store in progress

// Stats returns the counters; safe from any goroutine.
func (r *Reader) Stats() ReaderStats {
	return ReaderStats{
		Next:         r.head.Load(),
		Delivered:    r.stats.delivered.Load(),
		Gap:          r.stats.gap.Load(),
		Overrun:      r.stats.overrun.Load(),
		Corrupt:      r.stats.corrupt.Load(),
		Skip:         r.stats.skip.Load(),
		Recovered:    r.stats.recovered.Load(),
		CreditErrors: r.stats.creditErr.Load(),
		Torn:         r.stats.torn.Load(),
		Epoch:        r.stats.epoch.Load(),
		Untrusted:    r.stats.untrusted.Load(),
		BelowStart:   r.stats.belowStart.Load(),
	}
}

// Poll delivers what is ready, up to MaxBatch ticks and events, to h and
// returns how many it delivered (ticks plus events), for an IdleStrategy.
// It never blocks (journal recovery, when configured, waits for its READs).
// After Close it returns 0.
func (r *Reader) Poll(h Handler) int {
	if r.closed.Load() {
		return 0
	}
	if r.nextJournal.Load() != nil { // pairs with the Swap in SetJournal
		r.adoptJournal()
	}
	return r.poll(h, r.maxBatch)
}

// ReadInto copies the next tick into t and its payload into buf (t.Payload
// = buf[:len]). It returns ok for a tick; an Event (Kind != 0) when the next
// thing is an event; neither when nothing is ready. ErrShortBuffer leaves the
// tick unread; ErrClosed after Close. ReadInto does not recover from the
// journal (Poll does): what is missing comes out as events.
func (r *Reader) ReadInto(t *Tick, buf []byte) (ok bool, ev Event, err error) {
	if r.closed.Load() {
		return false, Event{}, ErrClosed
	}
	r.into = intoHandler{r: r, t: t, buf: buf}
	r.recovering = true // one item per call: no journal recovery, which may yield several
	r.poll(&r.into, 1)
	r.recovering = false
	ok, ev, err = r.into.ok, r.into.ev, r.into.err
	r.into = intoHandler{}
	return ok, ev, err
}

type intoHandler struct {
	r   *Reader
	t   *Tick
	buf []byte
	ok  bool
	ev  Event
	err error
}

func (c *intoHandler) OnTicks(ts []Tick) {
	src := ts[0]
	if len(src.Payload) > len(c.buf) {
		c.err = ErrShortBuffer
		c.r.next = src.Seq // unread: poll's accounting runs after the handler
		addOwn(&c.r.stats.delivered, ^uint64(0))
		return
	}
	n := copy(c.buf, src.Payload)
	*c.t = src
	c.t.Payload = c.buf[:n]
	c.ok = true
}

func (c *intoHandler) OnEvent(ev Event) { c.ev = ev }

// poll is Poll with a limit on ticks plus events.
func (r *Reader) poll(h Handler, limit int) int {
	n, work := 0, 0
	for n+work < limit {
		seq := r.next
		off := int(seq&r.mask) * r.slotSize
		st := stampAt(r.slots, off)
		// Only the stamp's line is polled. Loading a two-line slot's second
		// line beside it (so both misses overlap) was measured slower while
		// the writer stores the header's line first: the reader takes the
		// payload's line back mid-write (two-thread ping-pong, 128-byte
		// slots: RTT p50 744 -> 1160 ns; with the second line written first
		// it helps a little, 544 -> 505).
		stamp := st.Load() // pairs with the writer's stamp WRITE, the last of the slot
		if stamp == seq {
			// decodeSlot, written out (a call per tick, with its spills,
			// was a seventh of a flooded subscriber's profile; the fuzz
			// test checks that the two agree): the header's three words,
			// its check, then the payload (lossy: copied out).
			s := r.slots[off : off+r.slotSize : off+r.slotSize]
			w := (*[hdrLen]byte)(s[offBody:SlotHeaderSize])
			le := binary.LittleEndian
			ns, ltf, pc := le.Uint64(w[0:]), le.Uint64(w[8:]), le.Uint64(w[16:])
			ln := uint64(uint32(ltf))
			good := ln <= uint64(len(s)-SlotHeaderSize)
			var p []byte
			if good {
				p = s[SlotHeaderSize : SlotHeaderSize+ln : SlotHeaderSize+ln] // a view: no writer touches a reliable slot the reader has not released
			}
			if r.lossy {
				// Seqlock read: the writer stores StampBusy before it
				// touches a slot again, so an unchanged stamp after the
				// header's loads and the payload's copy proves both whole
				// against that writer. Only the payload is copied out (the
				// tick's payload is the copy), and the check is taken over
				// the copy: a second writer's frame for an older lap can
				// land under an unchanged stamp (headerCheck), and then
				// the sum tells.
				if good {
					p = copyPayload(r.scratch[n*r.slotSize:(n+1)*r.slotSize], s, p)
				}
				loadFence(&r.fence)
				if st.Load() != seq { // pairs with the writer's StampBusy WRITE
					r.stats.torn.Add(1)
					break // being rewritten by a later lap: the next poll sees the overrun
				}
			}
			good = good && uint32(pc>>32) == checkWords(seq, ns, ltf, uint32(pc), payloadSum(p))
			flags := uint16(ltf >> 48)
			if !good || (flags&FlagSkip != 0 && ln != 8) {
				work, n = work+n, r.flush(h, n)
				r.emit(h, Event{Kind: EventCorrupt, From: seq, To: seq})
				r.next = seq + 1
				work++
				continue
			}
			t := &r.batch[n]
			t.Seq, t.PublishNs, t.Type, t.Flags, t.Publisher, t.Payload = seq, int64(ns), uint16(ltf>>32), flags, uint32(pc), p
			if flags&FlagSkip != 0 {
				work, n = work+n, r.flush(h, n)
				to := skipTo(t)
				if to == 0 {
					r.emit(h, Event{Kind: EventCorrupt, From: seq, To: seq})
					r.next = seq + 1
				} else {
					r.emit(h, Event{Kind: EventSkip, From: seq, To: to})
					r.next = to + 1
				}
				work++
				continue
			}
			n++
			r.next = seq + 1
			continue
		}
		if stamp > seq && stamp != StampBusy && (stamp-seq)&r.mask == 0 && r.trusted(off, stamp) {
			work, n = work+n, r.flush(h, n)
			if es := r.epochAbove(seq); es > seq && stamp >= es { // pairs with the CAS in SetEpoch
				// A tick of a newer epoch sits in next's slot: the rest of
				// the ended epoch's range is passed as one EventEpoch (what
				// of it was written here has been overwritten, or comes
				// too late to be delivered in order).
				r.emit(h, Event{Kind: EventEpoch, From: seq, To: es - 1})
				r.next = es
				work++
				continue
			}
			// Lapped: stamp is at least a ring ahead; stamp-slots+1 is the
			// oldest sequence the ring may still hold.
			resume := stamp - r.mask
			work += r.lost(h, EventOverrun, seq, resume-1, stamp)
			r.next = resume
			continue
		}
		if n+work == 0 && r.slotSize > 64 {
			// Nothing ready: load the slot's last word too, so the line
			// the writer stores first (the payload's, slotOrder) is
			// fetched while the stamp's line is still awaited, not after.
			stampAt(r.slots, off+r.slotSize-8).Load()
		}
		break
	}
	work += n
	r.flush(h, n)
	r.flushEvent(h)
	if r.next != r.head.Load() { // the reader is head's only writer
		r.progress()
	}
	if work > 0 {
		return work
	}
	return r.idleCheck(h)
}

// copyPayload copies p, the payload of slot s (a view on s from its
// byte SlotHeaderSize), into dst (a scratch entry of a slot's size) and
// returns the copy. A payload of up to 64 bytes in a slot that holds 64
// (every 96-byte or larger slot: a tick, the bench's 64-byte message)
// is copied as four 16-byte moves, inlined, of the slot's first 64
// payload bytes (what lies past p is the slot's own, and the copy's
// spare bytes are never handed out): no runtime.memmove call per tick.
func copyPayload(dst, s, p []byte) []byte {
	if len(p) <= 64 && len(s) >= SlotHeaderSize+64 && len(dst) >= 64 {
		src := s[SlotHeaderSize : SlotHeaderSize+64]
		*(*[16]byte)(dst[0:16]) = *(*[16]byte)(src[0:16])
		*(*[16]byte)(dst[16:32]) = *(*[16]byte)(src[16:32])
		*(*[16]byte)(dst[32:48]) = *(*[16]byte)(src[32:48])
		*(*[16]byte)(dst[48:64]) = *(*[16]byte)(src[48:64])
		return dst[:len(p):len(p)]
	}
	k := copy(dst, p)
	return dst[:k:k]
}

// flush hands the pending run of n ticks to h and returns 0.
func (r *Reader) flush(h Handler, n int) int {
	if n > 0 {
		r.flushEvent(h)
		addOwn(&r.stats.delivered, uint64(n))
		h.OnTicks(r.batch[:n])
	}
	return 0
}

func (r *Reader) emit(h Handler, ev Event) {
	c := ev.Count()
	switch ev.Kind {
	case EventGap:
		r.stats.gap.Add(c)
	case EventOverrun:
		r.stats.overrun.Add(c)
	case EventCorrupt:
		r.stats.corrupt.Add(c)
	case EventSkip:
		r.stats.skip.Add(c)
	case EventEpoch:
		r.stats.epoch.Add(c)
	}
	if r.pend.Kind == ev.Kind && r.pend.To+1 == ev.From {
		r.pend.To = ev.To
		return
	}
	r.flushEvent(h)
	r.pend = ev
}

// flushEvent hands out the pending event, if any.
func (r *Reader) flushEvent(h Handler) {
	if r.pend.Kind != 0 {
		ev := r.pend
		r.pend = Event{}
		h.OnEvent(ev)
	}
}

// lost accounts for sequences from..to that the ring no longer (or never)
// held: what the journal still has is delivered, the rest is reported as
// kind. newest is the newest sequence known to exist (it bounds what the
// journal can hold). It returns the number of calls made to h.
func (r *Reader) lost(h Handler, kind EventKind, from, to, newest uint64) int {
	j := r.journal
	if j == nil || j.dead || r.recovering {
		r.emit(h, Event{Kind: kind, From: from, To: to})
		return 1
	}
	calls := 0
	first := from
	if jslots := uint64(j.desc.JournalSlots); newest >= jslots && newest-jslots+1 > first {
		first = newest - jslots + 1 // older ones are overwritten in the journal too
	}
	if first > to {
		r.emit(h, Event{Kind: kind, From: from, To: to})
		return 1
	}
	pending := from // start of the unreported run
	r.recovering = true
	for s := first; s <= to && !j.dead; s++ {
		t := &r.batch[0]
		if !j.fetch(r, s, t) {
			continue
		}
		if pending < s {
			r.emit(h, Event{Kind: kind, From: pending, To: s - 1})
			calls++
		}
		r.stats.recovered.Add(1)
		addOwn(&r.stats.delivered, 1)
		r.flushEvent(h)
		h.OnTicks(r.batch[:1])
		calls++
		pending = s + 1
	}
	r.recovering = false
	if pending <= to {
		r.emit(h, Event{Kind: kind, From: pending, To: to})
		calls++
	}
	return calls
}

// progress publishes the reader's position: to observers through the ring
// header, and to every publisher through its credit cell.
func (r *Reader) progress() {
	storeOwn(r.head, r.next) // pairs with Head/Stats loads and remote READs of the header
	r.gapSince = 0
	r.sendCredits(false)
}

// sendCredits writes the reader's position to every writer's credit cell
// that is creditEvery or more behind it (all that are behind, with force:
// the idle path, so a writer always learns the final position).
func (r *Reader) sendCredits(force bool) {
	cl := *r.credits.Load() // pairs with the Store in AddCredit/RemoveCredit
	if len(cl) == 0 {
		return
	}
	if r.signaled > 0 {
		r.reap()
	}
	binary.LittleEndian.PutUint64(r.creditBuf[:], r.next)
	for _, c := range cl {
		if c.failed || c.sent == r.next || (!force && r.next-c.sent < r.creditEvery) {
			continue
		}
		c.wr.Flags = rdma.FlagInline
		c.posts++
		if c.posts%creditSignalEvery == 0 {
			c.wr.Flags |= rdma.FlagSignaled
		}
		c.wr.Inline = r.creditBuf[:]
		err := c.qp.PostSend(&c.wr)
		c.wr.Inline = nil
		switch {
		case err == nil:
			c.sent = r.next
			if c.wr.Flags&rdma.FlagSignaled != 0 {
				r.signaled++
			}
		case err == rdma.ErrSendQueueFull:
			c.posts-- // try again on the next poll
		default:
			r.creditFailed(c)
		}
	}
}

const creditSignalEvery = 16

// reap drains the reader's CQ: signalled credit writes, and errors.
func (r *Reader) reap() {
	n := r.cq.Poll(r.comps[:])
	for i := 0; i < n; i++ {
		c := &r.comps[i]
		if c.ID == idCredit && c.Status == rdma.StatusSuccess {
			r.signaled--
			continue
		}
		if c.ID == idCredit {
			if c.Status != rdma.StatusFlushed {
				r.signaled--
			}
			for _, cr := range *r.credits.Load() {
				if cr.qp.Num() == c.QPN && !cr.failed {
					r.creditFailed(cr)
				}
			}
		}
		if r.journal != nil && c.ID == idRecover {
			r.journal.complete(c)
		}
	}
	if r.signaled < 0 {
		r.signaled = 0
	}
}

func (r *Reader) creditFailed(c *credit) {
	c.failed = true
	r.stats.creditErr.Add(1)
}

// idleCheck runs when a poll found nothing: it looks for a claimed sequence
// that stays unwritten while later ones are present. Cheap: it scans only
// every 64th idle poll.
func (r *Reader) idleCheck(h Handler) int {
	r.idle++
	if r.idle&63 != 0 {
		return 0
	}
	now := monoNs() // one clock read for the whole check
	if cl := *r.credits.Load(); len(cl) > 0 {
		// The position since the last credit WRITE, and new credits: at
		// most once per creditIdle. Every 64 empty polls, as before, was a
		// credit WRITE every few ticks of a paced feed (4,300 a second at
		// 20,000 ticks/s over tcp, each waking the publisher's responder);
		// a writer short of room READs the ring's head meanwhile.
		if now-r.creditAt >= creditIdle {
			r.creditAt = now
			r.sendCredits(true)
		}
	}
	if r.below != nil {
		r.watchBelow(now)
	}
	if r.gapTimeout <= 0 {
		return 0
	}
	interval := now - r.lastIdle
	r.lastIdle = now
	if r.gapSince == 0 || r.gapFrom != r.next {
		if r.next < r.gapHorizon && (r.epochAbove(r.next) <= r.next) {
			if end := r.firstPresentBelow(r.next+1, r.gapHorizon+1); end != 0 {
				r.gapSince = 0
				calls := r.lost(h, EventGap, r.next, end-1, r.gapHorizon)
				r.flushEvent(h)
				r.next = end
				r.progress()
				return calls
			}
		}
		// Scan at most 8 times per gap timeout: an idle reader must stay
		// quick to see the next tick, not busy reading stamps.
		if r.scanEnd != 0 && r.scanFor != r.next {
			r.scanEnd = 0 // the reader moved on: that scan is moot
		}
		if r.scanEnd == 0 {
			if now-r.lastScan < r.gapTimeout/8 {
				return 0
			}
			r.lastScan = now
			r.scanFor, r.scanAt, r.scanEnd = r.next, r.next+1, r.next+1+min(uint64(gapScan), r.mask)
		}
		limit, done := r.scanStep(interval)
		if !done {
			return 0
		}
		r.scanEnd = 0
		r.gapSeen = 0
		if limit != 0 {
			r.gapSeen = r.lastPresent(limit)
		}
		r.gapEpoch = false
		if es := r.epochAbove(r.next); es > r.next && (limit == 0 || limit >= es) {
			// Nothing of the ended epoch's range after next: once that
			// stays so for the gap timeout, the range is one EventEpoch.
			limit, r.gapEpoch = es, true
		}
		if limit == 0 && r.journal != nil {
			// Nothing later in the ring: ask the home whether next was
			// claimed at all (a claimant that died on the last tick of a
			// burst leaves nothing after it).
			// A fenced counter (FenceCounter) or one past the reservation
			// says nothing about what was written.
			if c, ok := r.journal.counter(r, r.gapTimeout/4); ok && c > r.next && c < FenceAdd && (r.bound.Load() == 0 || c <= r.bound.Load()) {
				limit = c
			}
		}
		if limit == 0 {
			limit = r.claimedLimit()
		}
		if limit == 0 {
			r.gapSince = 0
			return 0
		}
		r.gapFrom, r.gapLimit, r.gapSince = r.next, limit, now
		return 0
	}
	if now-r.gapSince < r.gapTimeout {
		return 0
	}
	r.gapSince = 0
	if es := r.epochAbove(r.next); !r.gapEpoch && es > r.next && es <= r.gapLimit {
		// An epoch start learnt while this gap waited lies inside it or
		// at its end (the gap's end came from a counter, SetClaimed's or
		// the journal's, of the new epoch; a new home's counter before
		// its first claim is its epoch's start, which is the ended
		// epoch's reservation end): the ended epoch's unused range is no
		// loss. Judge it again, with the epoch known, from the next scan
		// (which takes an epoch start at the limit as the range's end).
		return 0
	}
	r.gapFires++
	end := r.gapLimit
	for s := r.next; s < end && s-r.next <= r.mask; s++ {
		if r.present(s) {
			end = s
		}
	}
	if end <= r.next {
		return 0
	}
	from := r.next
	if r.gapEpoch && end == r.gapLimit {
		r.emit(h, Event{Kind: EventEpoch, From: from, To: end - 1})
		r.flushEvent(h)
		r.next = end
		r.progress()
		return 1
	}
	calls := r.lost(h, EventGap, from, end-1, r.gapLimit)
	r.flushEvent(h)
	r.next = end
	r.gapHorizon = max(r.gapHorizon, r.gapSeen)
	r.progress()
	return calls
}

// firstPresentBelow is the first sequence in from..limit-1 (within one
// ring) whose slot is written, or 0.
func (r *Reader) firstPresentBelow(from, limit uint64) uint64 {
	for s := from; s < limit && s-from <= r.mask; s++ {
		if r.present(s) {
			return s
		}
	}
	return 0
}

// lastPresent is the last sequence from from on, within one ring, whose
// slot is written (from itself if no later one is).
func (r *Reader) lastPresent(from uint64) uint64 {
	last := from
	for i := uint64(1); i <= r.mask; i++ {
		if r.present(from + i) {
			last = from + i
		}
	}
	return last
}

// gapScan bounds how far past next the reader looks for later sequences:
// the whole ring, so a hole of any size up to the ring's (a reconnect, a
// late join) is found; it costs one load per slot, 8 times per gap timeout
// at most, on the idle path only (spread over idle checks: scanStep).
const gapScan = MaxSlots

// present reports whether seq's slot holds seq or a later lap.
func (r *Reader) present(seq uint64) bool {
	off := int(seq&r.mask) * r.slotSize
	s := stampAt(r.slots, off).Load() // pairs with the writer's stamp WRITE
	if s == seq {
		return true
	}
	if es := r.epochAbove(seq); es > seq && s >= es {
		return false // a newer epoch's tick: no evidence that seq's epoch wrote anything later
	}
	return s > seq && s != StampBusy && r.trusted(off, s)
}

// scanStep goes on with the scan under way: the first sequence from
// scanAt to scanEnd whose slot is written, or 0, and done once the scan
// found one or reached its end. It reads scanLimit(interval) stamps at
// most and leaves the rest to the next idle checks, so a tick arriving
// during the scan waits for a chunk, not a ring.
func (r *Reader) scanStep(interval int64) (uint64, bool) {
	end := r.scanEnd
	if n := r.scanLimit(interval); end-r.scanAt > n {
		end = r.scanAt + n
	}
	for s := r.scanAt; s < end; s++ {
		if r.present(s) {
			return s, true
		}
	}
	r.scanAt = end
	return 0, end == r.scanEnd
}

// scanLimit is how many stamps one idle check reads when idle checks
// come interval apart: enough that a whole scan ends within its cadence
// (gap timeout / 8), so the gap timeout's reach stays what it was, and
// no fewer than scanChunk. A loop whose idle checks are further apart
// than the cadence (it parks between polls) scans at once.
//
// A whole ring's stamps take some 40 µs to read here at 4096 slots, 1.8
// ms at 262,144. The rule before this one scanned at once whenever two
// idle checks were 50 µs apart, which a yielding loop's 64 empty polls
// reach between the ticks of a 20 k/s feed: a tick arriving then waited
// for the whole scan, once per cadence (12.5 ms by default), and a
// subscriber's p99 grew with its ring.
func (r *Reader) scanLimit(interval int64) uint64 {
	cadence := r.gapTimeout / 8
	if interval >= cadence {
		return ^uint64(0)
	}
	if interval <= 0 {
		return scanChunk
	}
	checks := uint64(cadence / interval) // idle checks within one cadence, ≥ 1
	return max(scanChunk, min(uint64(gapScan), r.mask)/checks+1)
}

// scanChunk is the fewest stamps one idle check reads while a scan is
// under way (under a µs here).
const scanChunk = 64

// creditIdle is how often at most an idle reader writes its position to
// the writers' credit cells (idleCheck).
const creditIdle = int64(time.Millisecond)

// monoNs is the runtime's monotonic clock in ns (CLOCK_MONOTONIC through the
// vDSO; idle paths and the lease's slow path only): one clock read, where
// time.Since reads the wall clock too.
//
//go:linkname monoNs runtime.nanotime
func monoNs() int64
