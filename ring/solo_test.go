package ring

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/membarrier"
)

func skipUnlessSolo(t *testing.T) {
	t.Helper()
	skipIfForcedGeneric(t)
	if !membarrier.Available() {
		t.Skip("membarrier(2) is refused here: solo claims stay off (the shared path is tested everywhere else)")
	}
}

// rawCounter is the home's counter word itself (Counter shows a solo
// writer's next sequence instead).
func rawCounter(h *Home) uint64 { return atomic.LoadUint64(h.counterWord()) }

// checkEverySequenceOnce polls r until it holds last, and checks that it
// delivered first..last, each once, in order, with no event.
func checkEverySequenceOnce(t *testing.T, r *Ring, first, last uint64) []Tick {
	t.Helper()
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) > 0 && c.ticks[len(c.ticks)-1].Seq >= last || len(c.events) > 0 })
	require.Empty(t, c.events, "no gap, skip or overrun")
	require.Len(t, c.ticks, int(last-first+1))
	for i, tk := range c.ticks {
		require.Equal(t, first+uint64(i), tk.Seq, "tick %d", i)
	}
	return c.ticks
}

func TestSolo_LoneHomeWriter_ClaimsFromARun_ShareGivesTheTailBack(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{Slots: 4096})
	require.True(t, tp.w.Stats().Solo)
	for i := 1; i <= 10; i++ {
		seq, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
		require.Equal(t, uint64(i), seq)
	}
	batch := []Tick{{Payload: payloadFor(11, 8)}, {Payload: payloadFor(12, 8)}}
	first, err := tp.w.PublishBatch(batch)
	require.NoError(t, err)
	require.Equal(t, uint64(11), first)
	assert.Equal(t, uint64(1+soloRun), rawCounter(tp.home), "the counter holds the run's end")
	assert.Equal(t, uint64(13), tp.home.Counter(), "Counter is the next sequence the solo writer hands out")

	tp.home.Share()
	assert.Equal(t, uint64(13), rawCounter(tp.home), "Share gave the run's tail back")
	assert.False(t, tp.w.Stats().Solo)
	seq, err := tp.w.Publish(0, payloadFor(13, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(13), seq)
	assert.Equal(t, uint64(14), rawCounter(tp.home), "shared claims: the counter is exact")
	assert.Zero(t, at[hotLine](tp.home.mr.Bytes(), offHot).Solo.Load(),
		"no solo word once shared: readers READ it before the counter, and a stale one would say the counter is lower")
	tp.home.Share() // idempotent
	checkEverySequenceOnce(t, r, 1, 13)
	assert.Zero(t, tp.w.Stats().Skipped)
}

func TestSolo_GenericOrNoSoloHome_ClaimsShared(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere, Generic: true})
	assert.False(t, tp.w.Stats().Solo, "the generic path claims through the home QP")
	tp2 := newTopo(t, HomeConfig{}, WriterConfig{})
	assert.False(t, tp2.w.Stats().Solo, "no SoloHome: shared")
	other, err := NewHome(tp.dev, HomeConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	tp3 := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: other})
	assert.False(t, tp3.w.Stats().Solo, "a SoloHome that is not the writer's home is ignored")
}

// Publishers join a lone solo home writer that keeps publishing (its home
// Shares first, as the product does before it grants the counter), leave,
// and join again: the ring gets every sequence once, in order, and each
// writer's ticks are its own. Run with -race too.
func TestSolo_PublishersJoinAndLeave_EverySequenceOnce(t *testing.T) {
	skipUnlessSolo(t)
	const soloTicks, joinTicks = 12000, 3000
	tp := newTopo(t, HomeConfig{JournalSlots: 1024}, WriterConfig{SoloHome: soloHere, PublisherID: 1})
	r := tp.addRing(RingConfig{Slots: 1 << 15})
	require.True(t, tp.w.Stats().Solo)

	var sent atomic.Int64
	errc := make(chan error, 1)
	go func() {
		// The solo writer: single ticks and batches of 1..7.
		batch := make([]Tick, 7)
		for i := range batch {
			batch[i].Payload = make([]byte, 8)
		}
		for n := int64(0); n < soloTicks; {
			k := int64(1)
			var err error
			if n%5 == 4 {
				k = min(n%7+1, soloTicks-n)
				_, err = tp.w.PublishBatch(batch[:k])
			} else {
				_, err = tp.w.Publish(0, payloadFor(uint64(n), 8), 0)
			}
			if err != nil {
				errc <- err
				return
			}
			n += k
			sent.Store(n)
		}
		errc <- nil
	}()
	waitSent := func(n int64) {
		for deadline := time.Now().Add(10 * time.Second); sent.Load() < n && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	// Join, publish, leave; then join again, with fetch-and-add.
	waitSent(2000)
	tp.home.Share()
	w2 := tp.addWriter(WriterConfig{PublisherID: 2})
	for i := 0; i < joinTicks; i++ {
		_, err := w2.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	require.NoError(t, w2.Close())
	waitSent(6000)
	w3 := tp.addWriter(WriterConfig{PublisherID: 3, Claim: ClaimFAA, SoloHome: tp.home})
	assert.False(t, w3.Stats().Solo, "a home is solo once in its life")
	for i := 0; i < joinTicks; i++ {
		_, err := w3.PublishBatch([]Tick{{Payload: payloadFor(uint64(i), 8)}, {Payload: payloadFor(uint64(i), 8)}})
		require.NoError(t, err)
	}
	require.NoError(t, <-errc)

	total := uint64(soloTicks + 3*joinTicks)
	ticks := checkEverySequenceOnce(t, r, 1, total)
	per := map[uint32]int{}
	for _, tk := range ticks {
		per[tk.Publisher]++
	}
	assert.Equal(t, map[uint32]int{1: soloTicks, 2: joinTicks, 3: 2 * joinTicks}, per)
	assert.Equal(t, total+1, rawCounter(tp.home), "no sequence claimed and left unwritten")
	assert.Zero(t, tp.w.Stats().Skipped)
}

// Share while the solo writer publishes, from many goroutines at once:
// every Share returns with solo ended, and nothing is lost or doubled.
func TestSolo_ConcurrentShares_WhilePublishing(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{Slots: 1 << 14})
	const n = 8000
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 200 * time.Microsecond)
			tp.home.Share()
		}()
	}
	wg.Wait()
	assert.False(t, tp.w.Stats().Solo)
	require.NoError(t, <-errc)
	checkEverySequenceOnce(t, r, 1, n)
	assert.Equal(t, uint64(n+1), rawCounter(tp.home))
}

// A second solo candidate on the same home ends the first one's solo mode
// (its tail goes back) and claims shared; PublishAt leaves solo mode too.
func TestSolo_SecondCandidateAndPublishAt_LeaveSolo(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere, PublisherID: 1})
	r := tp.addRing(RingConfig{Slots: 1024})
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	w2 := tp.addWriter(WriterConfig{SoloHome: tp.home, PublisherID: 2})
	assert.False(t, w2.Stats().Solo)
	assert.Equal(t, uint64(4), rawCounter(tp.home))
	seq, err := w2.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), seq)
	seq, err = tp.w.Publish(0, payloadFor(5, 8), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), seq)

	tp2 := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere})
	r2 := tp2.addRing(RingConfig{Slots: 1024})
	_, err = tp2.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	seq, err = tp2.w.PublishAt(2, 0, payloadFor(2, 8), 0)
	require.NoError(t, err, "arbitration on the exact counter")
	assert.Equal(t, uint64(2), seq)
	_, err = tp2.w.PublishAt(2, 0, payloadFor(2, 8), 0)
	assert.ErrorIs(t, err, ErrLost)
	assert.False(t, tp2.w.Stats().Solo)
	checkEverySequenceOnce(t, r, 1, 5)
	checkEverySequenceOnce(t, r2, 1, 2)
}

// The fences stop a solo writer as they stop every claim: SetLimit (a run
// never reaches past it) and FenceCounter (caught at the next claim).
func TestSolo_FencedBySetLimitAndFenceCounter(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{Slots: 64})
	tp.w.SetLimit(4)
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	assert.Equal(t, uint64(4), rawCounter(tp.home), "the run stops at the limit")
	_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
	require.ErrorIs(t, err, ErrFenced)
	tp.w.SetLimit(1 << 20)
	_, err = tp.w.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)
	fcq := newCQ(t, tp.dev, 16)
	fq, _ := qpPair(t, tp.dev, fcq, tp.dev, tp.homeQ)
	_, err = FenceCounter(tp.dev, fq, fcq, tp.home.Desc(), 2*time.Second)
	require.NoError(t, err)
	_, err = tp.w.Publish(0, payloadFor(5, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "the first claim after the fence is refused")
	assert.Zero(t, tp.w.Stats().Skipped, "a fenced run's tail is the epoch's unused range, not a skip")
	checkEverySequenceOnce(t, r, 1, 4)
}

func TestSolo_ZeroAllocsPerPublish(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{JournalSlots: 1024}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{Slots: 1024})
	payload := make([]byte, 64)
	h := &nopHandler{}
	allocs := testing.AllocsPerRun(5000, func() {
		if _, err := tp.w.Publish(1, payload, 5); err != nil {
			panic(err)
		}
		r.Reader().Poll(h)
	})
	assert.Zero(t, allocs)
	assert.True(t, tp.w.Stats().Solo)
}

// A reader with a journal READs the home's counter when it waits with
// nothing later in its ring (was next claimed by a writer that died?). An
// idle solo topic's counter holds the run's end, far ahead: the reader
// must take the solo word, not report the run as a gap.
func TestSolo_IdleTopic_ReaderWithJournalReportsNoGap(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{GapTimeout: 20 * time.Millisecond})
	jq, _ := qpPair(t, tp.dev, r.reader.cq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	require.Greater(t, rawCounter(tp.home), uint64(4), "the run is reserved ahead")
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 3 })
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		r.Reader().Poll(&c)
	}
	assert.Empty(t, c.events, "an idle solo run is not a gap")
	tp.home.Share()
	_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
	require.NoError(t, err)
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 4 })
	assert.Equal(t, uint64(4), c.ticks[3].Seq)
	assert.Empty(t, c.events)
}

// A publisher that failed over retires its old home before its old writer
// (publisher/failover.go): closing a solo writer whose home is already
// closed (its region unmapped) ends solo mode without touching the home
// (the CLI's pub crashed with SIGSEGV in Share from Writer.Close).
func TestSolo_WriterClosedAfterItsHome_NoTouchOfTheUnmappedHome(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{SoloHome: soloHere})
	tp.addRing(RingConfig{Slots: 4096})
	_, err := tp.w.Publish(0, payloadFor(1, 8), 0)
	require.NoError(t, err)
	require.True(t, tp.w.Stats().Solo)
	require.NoError(t, tp.home.Close())
	assert.Zero(t, tp.home.Counter(), "a closed home has no counter")
	tp.home.Share() // nothing to give back to
	require.NoError(t, tp.w.Close())
}

// A solo home's writer claims a sequence after its lease end (so does not
// write it), and the home then fences its counter: the solo word still
// says the run went one further, but a fenced counter says nothing about
// what was written, so a reader with the journal waits for the new epoch
// and names the unused range once, as an epoch, not the claimed sequence
// as a gap (the CLI's NATS-outage test saw gap 561 then epoch 562..).
func TestSolo_ClaimPastTheLeaseThenFenced_OneEpochEventNoGap(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{JournalSlots: 64}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{GapTimeout: 20 * time.Millisecond})
	jq, _ := qpPair(t, tp.dev, r.reader.cq, tp.dev, tp.homeQ)
	require.NoError(t, r.Reader().SetJournal(tp.dev, jq, tp.home.Desc(), time.Second))
	for i := 1; i <= 3; i++ {
		_, err := tp.w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err)
	}
	var c collector
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.ticks) == 3 })
	tp.w.SetLeaseEnd(time.Now().Add(-time.Millisecond))
	_, err := tp.w.Publish(0, payloadFor(4, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "claimed after the lease end: not written")
	assert.Equal(t, uint64(4), tp.home.Counter(), "the refused claim went back to the run: no reader READing the solo word takes 4 for claimed")
	cq := newCQ(t, tp.dev, 64)
	fq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	_, err = FenceCounter(tp.dev, fq, cq, tp.home.Desc(), time.Second)
	require.NoError(t, err)
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); { // many gap timeouts
		r.Reader().Poll(&c)
	}
	assert.Empty(t, c.events, "a fenced counter is no claim: nothing named before the new epoch is known")
	r.Reader().SetEpoch(1000, 2000)
	pollUntil(t, r.Reader(), &c, func() bool { return len(c.events) > 0 })
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
		r.Reader().Poll(&c)
	}
	require.Len(t, c.events, 1)
	assert.Equal(t, Event{Kind: EventEpoch, From: 4, To: 999}, c.events[0])
}

// The lean path reads the TSC for the lease end once per leaseEvery ticks
// (writer_lean.go): a publisher that stalls right after a read and wakes
// up past its lease writes at most leaseEvery-1 more ticks before its
// next read refuses a claim, and that claim goes back to the run. A
// SetLeaseEnd in between voids what the last read allowed: the next
// claim reads at once.
func TestSolo_LeaseReadOncePerLeaseEveryTicks_AStallWritesAtMostTheWindow(t *testing.T) {
	skipUnlessSolo(t)
	tp := newTopo(t, HomeConfig{}, WriterConfig{SoloHome: soloHere})
	r := tp.addRing(RingConfig{Slots: 64})
	w := tp.w
	farLease := func() {
		w.SetLeaseEnd(time.Now().Add(time.Hour))
		w.leaseTSC.Store(math.MaxInt64) // as once the TSC rate is known: far before the deadline
	}
	_, err := w.Publish(0, payloadFor(1, 8), 0) // reserves the run: later claims take the lean path
	require.NoError(t, err)
	farLease()
	_, err = w.Publish(0, payloadFor(2, 8), 0)
	require.NoError(t, err, "within the lease: read, and the next leaseEvery-1 ticks need no read")
	// A stall: time passes, the lease ends, and nobody called
	// SetLeaseEnd (the lease loop stalled too). What time passing looks
	// like to the writer's reads:
	w.lease.Store(1)
	w.leaseTSC.Store(1)
	for i := 3; i <= leaseEvery+1; i++ {
		_, err := w.Publish(0, payloadFor(uint64(i), 8), 0)
		require.NoError(t, err, "tick %d: inside the window the last read allowed", i)
	}
	_, err = w.Publish(0, payloadFor(leaseEvery+2, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "the window's end: a read, and the lease is over")
	_, err = w.PublishBatch([]Tick{{Payload: payloadFor(leaseEvery+2, 8)}})
	require.ErrorIs(t, err, ErrFenced, "past the TSC deadline every claim reads")
	assert.Equal(t, uint64(leaseEvery+2), tp.home.Counter(), "the refused claims went back to the run")
	checkEverySequenceOnce(t, r, 1, leaseEvery+1)

	farLease()
	_, err = w.Publish(0, payloadFor(leaseEvery+2, 8), 0)
	require.NoError(t, err)
	w.SetLeaseEnd(time.Now().Add(-time.Millisecond))
	_, err = w.Publish(0, payloadFor(leaseEvery+3, 8), 0)
	require.ErrorIs(t, err, ErrFenced, "a SetLeaseEnd voids the window: the next claim reads")

	farLease()
	batch := make([]Tick, leaseEvery)
	for i := range batch {
		batch[i].Payload = payloadFor(uint64(leaseEvery+3+i), 8)
	}
	_, err = w.PublishBatch(batch)
	require.NoError(t, err)
	w.lease.Store(1)
	w.leaseTSC.Store(1)
	_, err = w.PublishBatch(batch[:1])
	require.NoError(t, err, "a read before a batch of %d allows %d ticks after it", leaseEvery, leaseEvery-1)
	_, err = w.PublishBatch(batch)
	require.ErrorIs(t, err, ErrFenced, "a claim of more ticks than the window has left reads")
}
