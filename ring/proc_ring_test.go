package ring

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// Three publisher processes (FAA single, FAA batched, CAS single) and two
// subscriber processes on one topic: both subscribers receive every
// sequence exactly once, in the same order, with every checksum right.
func TestProc_ThreePublishersTwoSubscribers_EverySequenceOnceSameOrder(t *testing.T) {
	total := uint64(1_000_000)
	if testing.Short() {
		total = 30_000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	per := []uint64{total / 3, total / 3, total - 2*(total/3)}
	// No publisher dies here: a long gap timeout keeps a publisher that the
	// loaded machine deschedules between claim and write from being taken
	// for dead.
	sub := subSpec{args: []string{"-mode", "reliable", "-slots", "16384", "-end", itoa(total), "-limit", "120s", "-gap", "20s"}}
	pt := startTopic(t, ctx, []subSpec{sub, sub}, []pubSpec{
		{args: []string{"-claim", "faa", "-how", "plain", "-n", itoa(per[0])}},
		{args: []string{"-claim", "faa", "-how", "batch", "-n", itoa(per[1])}},
		{args: []string{"-claim", "cas", "-how", "plain", "-n", itoa(per[2])}},
	})
	start := time.Now()
	pt.goAll()
	pubs := pt.done(pt.pubs, 130*time.Second)
	subs := pt.done(pt.subs, 130*time.Second)
	elapsed := time.Since(start)
	pt.exitAll()
	for k, p := range pubs {
		assert.Equal(t, per[k], num(t, p, "published"), "pub%d %v", k+1, p)
		assert.Zero(t, num(t, p, "errs")+num(t, p, "postbp"), "pub%d %v", k+1, p)
	}
	for j, s := range subs {
		assert.Equal(t, total, num(t, s, "delivered"), "sub%d %v", j, s)
		assert.Zero(t, num(t, s, "badcrc"), "sub%d", j)
		assert.Zero(t, num(t, s, "badorder"), "sub%d", j)
		assert.Equal(t, "-", s["events"], "sub%d: nothing lost", j)
	}
	assert.Equal(t, subs[0]["order"], subs[1]["order"], "both subscribers saw the same order")
	assert.Equal(t, total+1, pt.home.Counter())
	t.Logf("%d ticks, 3 publishers (CAS retries %s), 2 subscribers, %v (shared 2-core machine)",
		total, pubs[2]["casretries"], elapsed)
}

// Lossy mode: a subscriber that stalls never slows the publisher; its
// overrun events account exactly for what it missed; every delivered tick
// verifies.
func TestProc_LossyStall_PublisherNeverBlocksOverrunsAccountExactly(t *testing.T) {
	n := uint64(200_000)
	if testing.Short() {
		n = 40_000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pt := startTopic(t, ctx,
		[]subSpec{
			{args: []string{"-mode", "lossy", "-slots", "1024", "-end", itoa(n), "-stall-after", "1000", "-stall-for", "500ms"}},
			// A tiny ring read while the publisher laps it: the seqlock's
			// re-check is what keeps torn copies out.
			{args: []string{"-mode", "lossy", "-slots", "8", "-end", itoa(n), "-idle", "yield"}},
			// The same with 96-byte slots: every other one starts half way
			// into a cache line, beside its neighbour's payload.
			{args: []string{"-mode", "lossy", "-slots", "8", "-slot-size", "96", "-end", itoa(n), "-idle", "yield"}},
		},
		[]pubSpec{{args: []string{"-claim", "cas", "-how", "plain", "-n", itoa(n), "-timeout", "100ms"}}})
	pt.goAll()
	p := pt.done(pt.pubs, 80*time.Second)[0]
	subs := pt.done(pt.subs, 80*time.Second)
	s := subs[0]
	pt.exitAll()
	for _, tiny := range subs[1:] {
		assert.Equal(t, n, num(t, tiny, "delivered")+num(t, tiny, "overrun"), "%v", tiny)
		assert.Zero(t, num(t, tiny, "badcrc")+num(t, tiny, "badorder")+num(t, tiny, "gap")+num(t, tiny, "corrupt"), "%v", tiny)
		t.Logf("8-slot ring: delivered %s, overrun %s, torn copies caught %s", tiny["delivered"], tiny["overrun"], tiny["torn"])
	}
	assert.Equal(t, n, num(t, p, "published"), "%v", p)
	assert.Zero(t, num(t, p, "errs")+num(t, p, "prebp")+num(t, p, "postbp"), "the publisher never waited: %v", p)
	delivered, overrun := num(t, s, "delivered"), num(t, s, "overrun")
	assert.Equal(t, n, delivered+overrun, "every sequence delivered or reported: %v", s)
	assert.Greater(t, overrun, uint64(0), "the stall was lapped")
	assert.Zero(t, num(t, s, "gap")+num(t, s, "corrupt"), "%v", s)
	assert.Zero(t, num(t, s, "badcrc"), "no torn tick delivered")
	assert.Zero(t, num(t, s, "badorder"))
	t.Logf("delivered %d, overrun %d, torn copies caught %s", delivered, overrun, s["torn"])
}

// Reliable mode: the same stall loses nothing; the publisher waits, and
// past its timeout gets ErrBackPressure with nothing claimed, then goes on
// once the subscriber catches up.
func TestProc_ReliableStall_NothingLostPublisherTimesOut(t *testing.T) {
	n := uint64(20_000)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pt := startTopic(t, ctx,
		[]subSpec{{args: []string{"-mode", "reliable", "-slots", "1024", "-end", itoa(n), "-stall-after", "1000", "-stall-for", "1500ms"}}},
		[]pubSpec{{args: []string{"-claim", "cas", "-how", "plain", "-n", itoa(n), "-timeout", "300ms", "-retry"}}})
	pt.goAll()
	p := pt.done(pt.pubs, 80*time.Second)[0]
	s := pt.done(pt.subs, 80*time.Second)[0]
	pt.exitAll()
	assert.Equal(t, n, num(t, p, "published"), "%v", p)
	assert.GreaterOrEqual(t, num(t, p, "prebp"), uint64(1), "the publisher timed out at least once: %v", p)
	assert.Zero(t, num(t, p, "postbp")+num(t, p, "errs"), "%v", p)
	assert.Equal(t, n, num(t, s, "delivered"), "%v", s)
	assert.Equal(t, "-", s["events"], "nothing lost")
	assert.Zero(t, num(t, s, "badcrc")+num(t, s, "badorder"))
	assert.Equal(t, n+1, pt.home.Counter(), "refused publishes claimed nothing")
}

// A publisher SIGKILLed between claim and write: each subscriber (one
// reliable, one lossy) delivers one gap event for exactly that sequence
// after the gap timeout, and carries on.
func TestProc_PublisherKilledBetweenClaimAndWrite_OneGapThenOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const end = 100 + 1 + 1000
	pt := startTopic(t, ctx,
		[]subSpec{
			{args: []string{"-mode", "reliable", "-end", itoa(end), "-gap", "200ms"}},
			{args: []string{"-mode", "lossy", "-end", itoa(end), "-gap", "200ms"}},
		},
		[]pubSpec{
			{args: []string{"-claim", "faa", "-how", "die", "-n", "100"}},
			{args: []string{"-claim", "cas", "-how", "plain", "-n", "1000"}},
		})
	victim, other := pt.pubs[0], pt.pubs[1]
	victim.send(t, "GO")
	claimed := victim.expect(t, "CLAIMED", 60*time.Second)[0]
	require.Equal(t, "101", claimed)
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	victim.wait()
	other.send(t, "GO")
	p := pt.done([]*proc{other}, 60*time.Second)[0]
	subs := pt.done(pt.subs, 60*time.Second)
	pt.exitAll()
	assert.Equal(t, uint64(1000), num(t, p, "published"), "%v", p)
	for j, s := range subs {
		assert.Equal(t, "-,gap:101-101", s["events"], "sub%d %v", j, s)
		assert.Equal(t, uint64(end-1), num(t, s, "delivered"), "sub%d", j)
		assert.Zero(t, num(t, s, "badcrc")+num(t, s, "badorder"), "sub%d", j)
	}
}

// A/B arbitration: two publisher processes publish the same exchange
// sequence numbers with PublishAt; each subscriber gets each number once;
// every loss is reported to the losing line.
func TestProc_ABLines_EachNumberOnceLoserIsTold(t *testing.T) {
	n := uint64(100_000)
	if testing.Short() {
		n = 10_000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sub := subSpec{args: []string{"-mode", "reliable", "-slots", "16384", "-end", itoa(n), "-exch", "-gap", "20s"}}
	line := pubSpec{args: []string{"-claim", "cas", "-how", "at", "-n", itoa(n)}}
	pt := startTopic(t, ctx, []subSpec{sub, sub}, []pubSpec{line, line})
	pt.goAll()
	pubs := pt.done(pt.pubs, 110*time.Second)
	subs := pt.done(pt.subs, 110*time.Second)
	pt.exitAll()
	a, b := pubs[0], pubs[1]
	assert.Equal(t, n, num(t, a, "published")+num(t, b, "published"), "%v %v", a, b)
	assert.Equal(t, n, num(t, a, "lost")+num(t, b, "lost"), "every losing copy was told: %v %v", a, b)
	assert.Zero(t, num(t, a, "errs")+num(t, b, "errs"))
	for j, s := range subs {
		assert.Equal(t, n, num(t, s, "delivered"), "sub%d %v", j, s)
		assert.Zero(t, num(t, s, "badexch"), "sequence = exchange number")
		assert.Zero(t, num(t, s, "badcrc")+num(t, s, "badorder"))
		assert.Equal(t, "-", s["events"])
	}
	assert.Equal(t, subs[0]["order"], subs[1]["order"])
	t.Logf("line A won %s, line B won %s", a["published"], b["published"])
}

// A publisher SIGKILLed after its journal write but before its ring
// writes: subscribers that reach the home recover the tick from the
// journal (RDMA READs across processes) after the gap timeout; nothing is
// lost.
func TestProc_PublisherKilledAfterJournal_TickRecoveredFromJournal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const end = 100 + 1 + 1000
	pt := startTopicJ(t, ctx, 4096,
		[]subSpec{
			{args: []string{"-mode", "reliable", "-end", itoa(end), "-gap", "200ms"}, journal: true},
			{args: []string{"-mode", "lossy", "-end", itoa(end), "-gap", "200ms"}, journal: true},
		},
		[]pubSpec{
			{args: []string{"-claim", "faa", "-how", "die-journal", "-n", "100"}},
			{args: []string{"-claim", "cas", "-how", "plain", "-n", "1000"}},
		})
	victim, other := pt.pubs[0], pt.pubs[1]
	victim.send(t, "GO")
	require.Equal(t, "101", victim.expect(t, "CLAIMED", 60*time.Second)[0])
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	victim.wait()
	other.send(t, "GO")
	p := pt.done([]*proc{other}, 60*time.Second)[0]
	subs := pt.done(pt.subs, 60*time.Second)
	pt.exitAll()
	assert.Equal(t, uint64(1000), num(t, p, "published"), "%v", p)
	for j, s := range subs {
		assert.Equal(t, "-", s["events"], "sub%d %v", j, s)
		assert.Equal(t, uint64(end), num(t, s, "delivered"), "sub%d", j)
		assert.Equal(t, uint64(1), num(t, s, "recovered"), "sub%d", j)
		assert.Zero(t, num(t, s, "badcrc")+num(t, s, "badorder"), "sub%d", j)
	}
}
