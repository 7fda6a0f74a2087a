package ring

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tickbus/tickbus/internal/membarrier"
)

// Solo claims: a single-writer sequencer (go-disruptor's
// SingleProducerSequencer beside its shared one).
//
// While a topic has one publisher and that publisher is the home (its
// counter in the publisher's own memory, mapped: the direct path), the
// writer need not run a locked CAS per claim. It reserves a run of
// soloRun sequences ahead with one CAS on the counter (counter: end →
// end+soloRun) and hands them out with plain loads and stores; the counter
// reads end, the run's end, all along. Every sequence it hands out it won
// by CAS, so nothing is handed out twice whoever else touches the counter;
// what the home must do is end the solo mode before it grants the counter
// to anyone else, so that the run's unused tail is given back instead of
// left a hole:
//
//	writer (publishing goroutine)         Home.Share (control goroutine)
//	st.next = c|soloBusy   (plain MOV)    st.req = 1                (XCHG)
//	if st.req != 0: leave solo            membarrier: every thread of the
//	take c..c+n-1 (extend the run by CAS)   process runs a full barrier
//	lease end, limit: refused → st.next = c wait until st.next has no soloBusy
//	st.next = c+n          (plain MOV)    CAS counter: st.end → st.next
//	                                      st.next = 0
//
// A writer whose load of req saw 0 has its busy store visible to Share
// after the membarrier (Share waits for it), and one that starts later sees
// req: so after Share's wait no solo claim runs or will run, and st.next ..
// st.end is exactly the unused tail. Readers see no change: the ticks and
// stamps are the same. A home has at most one solo writer in its life, and
// once shared stays shared. FenceCounter's FETCH_AND_ADD still stops the
// writer: its next extension CAS fails (the counter is not end), the writer
// leaves solo and its next claim is refused by the limit (ErrFenced); the
// tail it held is part of the fenced epoch's unused range, which readers
// report as one EventEpoch. The limit (SetLimit) bounds every claim as
// before, and a run never reaches past it.
//
// Solo needs membarrier(2) (internal/membarrier); without it, or off the
// direct path, the writer claims as always.

// soloRun is how many sequences one extension of a solo run reserves.
const soloRun = 1024

// soloBusy is set in soloState.next while a solo claim runs.
const soloBusy = 1 << 63

// soloState is shared by a home and its solo writer, on a line pair of
// its own. The writer's next sequence, stored per claim, is the home
// region's solo word (hotLine.Solo, beside the counter), so that readers
// who READ the counter for gap detection READ it too (journal.go).
type soloState struct {
	_     [LineSize]byte
	next  *atomic.Uint64 // the home's solo word: the writer's next sequence, |soloBusy during a claim (soloStore); Share loads; 0 when no solo writer
	end   atomic.Uint64  // writer: the run's end, as the counter holds it (soloStore); Share loads
	req   atomic.Uint32  // Share: 1 once the home shares its counter; the writer loads per claim
	armed atomic.Bool    // a writer took solo mode (NewWriter), once in the home's life
	_     [LineSize - 24]byte
}

// localHomes are the homes of this process, by descriptor, so that every
// writer made here on one of them is seen (armSolo).
var localHomes struct {
	sync.Mutex
	m map[HomeDesc]*Home
}

func addLocalHome(h *Home) {
	localHomes.Lock()
	defer localHomes.Unlock()
	if localHomes.m == nil {
		localHomes.m = make(map[HomeDesc]*Home)
	}
	localHomes.m[h.desc] = h
}

func dropLocalHome(h *Home) {
	localHomes.Lock()
	defer localHomes.Unlock()
	if localHomes.m[h.desc] == h {
		delete(localHomes.m, h.desc)
	}
}

func localHome(d HomeDesc) *Home {
	localHomes.Lock()
	defer localHomes.Unlock()
	return localHomes.m[d]
}

// armSolo makes w the home's solo writer if it can be: the first writer
// to ask (solo is w's SoloHome), on the direct path, where membarrier
// works, before any Share. Any other writer made on the home's own device
// Shares it first: a solo writer's tail goes back before another claims
// beside it. (Writers on other devices, other processes' above all, reach
// the home through its owner, which Shares before it grants them the
// counter.) Before w is shared.
func (w *Writer) armSolo(solo *Home) {
	h := localHome(w.homeDesc)
	if h == nil || h.dev != w.dev {
		return
	}
	if solo != h {
		h.Share()
		return
	}
	if w.dctr == nil || !membarrier.Available() {
		h.Share() // claims go the shared way: once shared, a home stays so
		return
	}
	s := &h.solo
	if s.req.Load() != 0 || !s.armed.CompareAndSwap(false, true) {
		// Another writer of ours was solo on this home: end it, so its
		// unused run goes back before this one claims beside it.
		h.Share()
		return
	}
	if s.req.Load() != 0 { // a Share between the two looks: it saw nobody armed
		s.armed.Store(false)
		return
	}
	c := atomic.LoadUint64(w.dctr)
	w.cached, w.runEnd = c, c
	s.end.Store(c)
	s.next.Store(c) // pairs with Share's Load
	w.soloHome, w.soloOn = h, true
	w.soloNext, w.soloReq = word(s.next), &s.req
}

// soloClaim takes n sequences from the run, extending it when it is short.
// ok false: the writer left solo mode (the home shares its counter, or the
// counter moved under the run); claim the shared way. ok true with
// ErrFenced: the lease end or the limit refuses the claim, checked before
// it shows, and the sequences stay in the run (no reader READing the solo
// word takes them for claimed and names them a gap).
func (w *Writer) soloClaim(n uint64) (first uint64, ok bool, err error) {
	s := &w.soloHome.solo
	c := w.cached
	soloStore(word(s.next), c|soloBusy) // pairs with Share's Load after its membarrier
	if s.req.Load() != 0 {              // pairs with Share's Swap
		soloStore(word(s.next), c) // a Share waiting for the busy bit reads c: the tail from c goes back
		w.soloOn = false
		// Wait for Share to give the tail back: a shared claim before
		// that would take the run's end and leave the tail a hole.
		w.soloHome.shareWait()
		// Share cleared the word before it finished, but the busy store
		// above may have landed after that: once Share is done nobody
		// else stores it, so clear it again. A stale word would tell
		// readers (who READ it before the counter) a counter lower than
		// the real one.
		soloStore(word(s.next), 0)
		w.cached = atomic.LoadUint64(w.dctr)
		return 0, false, nil
	}
	if atomic.LoadUint64(w.dctr) != w.runEnd {
		// A plain load of a line only this writer stores to, unless the
		// counter was fenced (or claimed by someone nobody Shared it
		// with): caught at once, as a claim would be.
		first, ok = w.soloLost(c)
		return first, ok, nil
	}
	if c+n > w.runEnd {
		k := max(n, soloRun)
		if lim := w.fence.Load(); lim > w.runEnd && lim-w.runEnd < k && lim-w.runEnd >= c+n-w.runEnd {
			k = lim - w.runEnd // a run never reaches past the limit
		}
		if !w.dhome.Live() || !atomic.CompareAndSwapUint64(w.dctr, w.runEnd, w.runEnd+k) {
			first, ok = w.soloLost(c)
			return first, ok, nil
		}
		w.runEnd += k
		soloStore(word(&s.end), w.runEnd) // before next drops soloBusy: Share reads both after
	}
	if !w.claimable(c, n) {
		soloStore(word(s.next), c) // no claim shows: Share, waiting for the busy bit, gives back from c
		return 0, true, ErrFenced
	}
	w.cached = c + n
	soloStore(word(s.next), c+n) // pairs with Share's Load
	return c, true, nil
}

// soloLost leaves solo mode because the counter moved under the run:
// fenced (FenceCounter), or claimed by someone nobody Shared it with (or
// the home's mapping died). The run's tail from c is handed out to nobody:
// part of a fenced epoch's unused range, which readers report, or counted
// skipped otherwise. The shared claim that follows learns the counter.
func (w *Writer) soloLost(c uint64) (uint64, bool) {
	s := &w.soloHome.solo
	if v := atomic.LoadUint64(w.dctr); v < FenceAdd && w.runEnd > c {
		w.stats.skipped.Add(w.runEnd - c)
	}
	soloStore(word(&s.end), 0)
	soloStore(word(s.next), 0) // no run: Share has nothing to give back, readers READ the counter alone
	w.soloOn = false
	return 0, false
}

// Share ends the home's solo mode, if a writer has it: after it returns no
// solo claim runs or will run, and the counter is exact again (the run's
// unused tail given back). Call it before the home grants its counter to
// another publisher. Control path (a membarrier syscall); safe from any
// goroutine, while the solo writer publishes. Idempotent.
func (h *Home) Share() {
	if h.closed.Load() {
		return // its region may be unmapped: no counter to give back to, nobody to grant it to
	}
	s := &h.solo
	if s.req.Swap(1) != 0 || !s.armed.Load() { // pairs with the writer's Load of req in soloClaim
		h.shareWait()
		return
	}
	membarrier.Fence() // armed implies Available
	next := s.next.Load()
	for ; next&soloBusy != 0; next = s.next.Load() {
		runtime.Gosched() // a claim under way: a few stores, unless its goroutine was preempted
	}
	// next is the word as the loop found it free: a claim that starts
	// after this sees req and hands nothing out (soloClaim), so reading
	// the word again could only find its busy bit.
	end := s.end.Load()
	if next != 0 && next < end {
		// shm only (armed implies the direct path): the counter's CPU
		// atomics are the QPs' own. It fails only if the counter moved
		// (fenced): then there is nothing to give back.
		atomic.CompareAndSwapUint64(h.counterWord(), end, next)
	}
	s.next.Store(0)      // after the give-back: a reader READs this word before the counter (journal.go)
	s.armed.Store(false) // pairs with shareWait's Load: done
}

// shareWait waits for a Share under way elsewhere to finish.
func (h *Home) shareWait() {
	for h.solo.armed.Load() && h.solo.req.Load() != 0 {
		runtime.Gosched()
	}
}

// soloLeave ends this writer's solo mode (Close; PublishAt, whose CAS
// needs the exact counter). Publishing goroutine.
func (w *Writer) soloLeave() {
	if w.soloHome != nil {
		w.soloOn = false
		w.soloHome.Share()
		w.cached = atomic.LoadUint64(w.dctr)
	}
}

// counterWord is the home's counter in its own memory.
func (h *Home) counterWord() *uint64 {
	return word(&at[hotLine](h.mr.Bytes(), offHot).Value)
}
