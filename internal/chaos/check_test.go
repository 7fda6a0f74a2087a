package chaos

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/ring"
)

// run makes delivered ticks for seqs from publisher 1, the hash a function
// of the sequence (so two subscribers' ticks at one sequence agree).
func run(seqs ...uint64) []Tick {
	out := make([]Tick, len(seqs))
	for i, s := range seqs {
		out[i] = Tick{Seq: s, Publisher: 1, Hash: 1000 + s}
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var s []uint64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

// pub1 is publisher 1, which recorded every sequence from 1 to n.
func pub1(n uint64) Publisher {
	return Publisher{Name: "p1", ID: 1, Published: run(seqRange(1, n)...), Complete: true}
}

func ev(from, to uint64) Event { return Event{Kind: 1, From: from, To: to} }

func TestCheck_CleanRecordsPass(t *testing.T) {
	a := Subscriber{Name: "a", Ticks: run(append(seqRange(1, 4), seqRange(8, 10)...)...), Events: []Event{ev(5, 7)}}
	b := Subscriber{Name: "b", Ticks: run(seqRange(3, 10)...), Events: []Event{ev(1, 2)}}   // joined late, told
	c := Subscriber{Name: "c", Ticks: run(seqRange(1, 10)...), Events: []Event{ev(11, 20)}} // a loss after its last tick
	r := Check([]Subscriber{a, b, c}, []Publisher{pub1(10)})
	require.NoError(t, r.Err(), r.String())
	assert.Equal(t, uint64(3), r.Subscribers[0].Named)
	assert.Equal(t, uint64(1), r.Subscribers[0].First)
	assert.Equal(t, uint64(10), r.Subscribers[0].Last)
	assert.Equal(t, 10, r.Published)
}

func TestCheck_FindsEachFault(t *testing.T) {
	cases := []struct {
		name string
		subs []Subscriber
		pubs []Publisher
		want error
	}{
		{"a duplicate", []Subscriber{{Name: "a", Ticks: run(1, 2, 2, 3)}}, []Publisher{pub1(3)}, ErrDuplicate},
		{"a duplicate out of place", []Subscriber{{Name: "a", Ticks: run(1, 2, 3, 2)}}, []Publisher{pub1(3)}, ErrDuplicate},
		{"a silent hole", []Subscriber{{Name: "a", Ticks: run(1, 2, 5, 6), Events: []Event{ev(3, 3)}}}, []Publisher{pub1(6)}, ErrSilentHole},
		{"a double-named sequence", []Subscriber{{Name: "a", Ticks: run(1, 6), Events: []Event{ev(2, 4), ev(4, 5)}}}, []Publisher{pub1(6)}, ErrDoubleNamed},
		{"one event twice", []Subscriber{{Name: "a", Ticks: run(1, 4), Events: []Event{ev(2, 3), ev(2, 3)}}}, []Publisher{pub1(4)}, ErrDoubleNamed},
		{"delivered and named", []Subscriber{{Name: "a", Ticks: run(1, 2, 3), Events: []Event{ev(2, 2)}}}, []Publisher{pub1(3)}, ErrDeliveredAndNamed},
		{"delivered out of order", []Subscriber{{Name: "a", Ticks: run(1, 3, 2)}}, []Publisher{pub1(3)}, ErrOrder},
		{"two orders", []Subscriber{
			{Name: "a", Ticks: []Tick{{Seq: 1, Publisher: 1, Hash: 7}, {Seq: 2, Publisher: 1, Hash: 8}}},
			{Name: "b", Ticks: []Tick{{Seq: 1, Publisher: 1, Hash: 8}, {Seq: 2, Publisher: 1, Hash: 7}}},
		}, nil, ErrOrder},
		{"a sequence with two ticks across subscribers", []Subscriber{
			{Name: "a", Ticks: []Tick{{Seq: 1, Publisher: 1, Hash: 7}}},
			{Name: "b", Ticks: []Tick{{Seq: 1, Publisher: 2, Hash: 9}}},
		}, []Publisher{{Name: "p1", ID: 1}, {Name: "p2", ID: 2}}, ErrTwoTicks},
		{"a sequence handed out to two publishers", []Subscriber{{Name: "a", Ticks: run(1)}}, []Publisher{
			pub1(1), {Name: "p2", ID: 2, Published: []Tick{{Seq: 1, Publisher: 2, Hash: 5}}, Complete: true},
		}, ErrTwoTicks},
		{"a delivered tick unlike its publisher's", []Subscriber{{Name: "a", Ticks: []Tick{{Seq: 1, Publisher: 1, Hash: 66}}}}, []Publisher{pub1(1)}, ErrTwoTicks},
		{"a tick nobody published", []Subscriber{{Name: "a", Ticks: run(1, 2)}}, []Publisher{pub1(1)}, ErrUnpublished},
		{"a tick from an unknown publisher", []Subscriber{{Name: "a", Ticks: []Tick{{Seq: 1, Publisher: 9, Hash: 1}}}}, nil, ErrUnpublished},
		{"an unrecorded tick below a killed publisher's last record", []Subscriber{{Name: "a", Ticks: run(1, 2, 3)}},
			[]Publisher{{Name: "p1", ID: 1, Published: run(1, 3)}}, ErrUnpublished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.subs, c.pubs)
			err := r.Err()
			require.Error(t, err, "the checker must reject %s", c.name)
			assert.ErrorIs(t, err, c.want)
			t.Log(err)
		})
	}
}

func TestCheck_KilledPublishersTailAndFailedPublishesAreListedNotFaults(t *testing.T) {
	s := Subscriber{Name: "a", Ticks: []Tick{
		{Seq: 1, Publisher: 1, Hash: 1001},
		{Seq: 2, Publisher: 1, Hash: 77}, // Publish failed, the tick landed
		{Seq: 3, Publisher: 1, Hash: 1003},
		{Seq: 4, Publisher: 1, Hash: 1004}, // published, then killed before the record
	}}
	p := Publisher{Name: "p1", ID: 1, Published: run(1, 3), Failed: []Tick{{Publisher: 1, Hash: 77}}}
	r := Check([]Subscriber{s}, []Publisher{p})
	require.NoError(t, r.Err())
	assert.Equal(t, 1, r.UnrecordedTail)
	assert.Equal(t, 1, r.LandedDespiteError)

	p.Complete = true // a publisher that exited by itself recorded everything
	assert.ErrorIs(t, Check([]Subscriber{s}, []Publisher{p}).Err(), ErrUnpublished)
}

func TestCheck_EventsToTheTopOfTheRangeDoNotWrap(t *testing.T) {
	epoch := func(from, to uint64) Event { return Event{Kind: uint8(ring.EventEpoch), From: from, To: to} }
	s := Subscriber{Name: "a", Ticks: run(1, 2), Events: []Event{epoch(3, math.MaxUint64)}}
	require.NoError(t, Check([]Subscriber{s}, []Publisher{pub1(2)}).Err())
	s.Events = append(s.Events, epoch(math.MaxUint64, math.MaxUint64))
	assert.ErrorIs(t, Check([]Subscriber{s}, []Publisher{pub1(2)}).Err(), ErrDoubleNamed)
	s.Events = []Event{epoch(2, math.MaxUint64)}
	assert.ErrorIs(t, Check([]Subscriber{s}, []Publisher{pub1(2)}).Err(), ErrDeliveredAndNamed)
	s.Events = []Event{ev(1, math.MaxUint64), ev(5, math.MaxUint64)} // gaps: named far more than was claimed, without wrapping the sum
	err := Check([]Subscriber{s}, []Publisher{pub1(2)}).Err()
	assert.ErrorIs(t, err, ErrMisnamed)
	assert.ErrorIs(t, err, ErrDoubleNamed)
}

func TestReport_ErrKeepsTwentyOfAKindAndCountsTheRest(t *testing.T) {
	var ticks []uint64
	for s := uint64(1); s <= 100; s += 2 { // 49 holes
		ticks = append(ticks, s)
	}
	r := Check([]Subscriber{{Name: "a", Ticks: run(ticks...)}}, []Publisher{pub1(100)})
	require.Len(t, r.Problems, 49)
	assert.ErrorContains(t, r.Err(), "29 more")
}

func TestReport_SummaryEndsWithTheFirstProblems(t *testing.T) {
	var ticks []uint64
	for s := uint64(1); s <= 30; s += 2 { // 14 holes
		ticks = append(ticks, s)
	}
	r := Check([]Subscriber{{Name: "a", Ticks: run(ticks...)}}, []Publisher{pub1(30)})
	require.Len(t, r.Problems, 14)
	sum := r.Summary(10)
	assert.True(t, strings.HasPrefix(sum, r.String()), "the summary starts with the counts")
	assert.Contains(t, sum, "problem 1: "+r.Problems[0].Error())
	assert.Contains(t, sum, "problem 10: "+r.Problems[9].Error())
	assert.NotContains(t, sum, "problem 11:")
	assert.True(t, strings.HasSuffix(sum, "… and 4 more problems"), "the summary ends with what it left out: %s", sum)
	assert.Equal(t, Check([]Subscriber{{Name: "a", Ticks: run(1, 2)}}, []Publisher{pub1(2)}).String(),
		Check([]Subscriber{{Name: "a", Ticks: run(1, 2)}}, []Publisher{pub1(2)}).Summary(10), "no problems, nothing added")
}

func TestFailovers_FromTheOldHomesLastTickToTheNewOnesFirst(t *testing.T) {
	ticks := []Tick{{Seq: 1, Ns: 100}, {Seq: 2, Ns: 200}, {Seq: 1001, Ns: 900}, {Seq: 1002, Ns: 950}}
	s := Subscriber{Name: "a", Ticks: ticks, Events: []Event{
		{Kind: uint8(ring.EventGap), From: 3, To: 3},
		{Kind: uint8(ring.EventEpoch), From: 3, To: 1000},
		{Kind: uint8(ring.EventEpoch), From: 2000, To: 3000}, // nothing delivered after it
	}}
	fs := Failovers(s)
	require.Len(t, fs, 1)
	assert.Equal(t, uint64(2), fs[0].LastOld.Seq)
	assert.Equal(t, uint64(1001), fs[0].FirstNew.Seq)
	assert.Equal(t, 700*time.Nanosecond, fs[0].Took)
}

func TestCheck_AnUnusedReservationNamedAsOverrunsIsMisnamed(t *testing.T) {
	// The old home handed out 1..3, reserved up to 1000; the new epoch
	// starts at 1001. Named by one epoch event: right. Named as overruns:
	// more sequences lost than were ever claimed.
	p := Publisher{Name: "p1", ID: 1, Published: run(1, 2, 3, 1001, 1002), Complete: true}
	good := Subscriber{Name: "a", Ticks: run(1, 2, 3, 1001, 1002), Events: []Event{{Kind: uint8(ring.EventEpoch), From: 4, To: 1000}}}
	r := Check([]Subscriber{good}, []Publisher{p})
	require.NoError(t, r.Err())
	assert.Equal(t, [2]uint64{1, 997}, r.Subscribers[0].ByKind[uint8(ring.EventEpoch)])
	bad := Subscriber{Name: "b", Ticks: run(1, 2, 3, 1001, 1002), Events: []Event{
		{Kind: uint8(ring.EventOverrun), From: 4, To: 500}, {Kind: uint8(ring.EventOverrun), From: 501, To: 1000}}}
	assert.ErrorIs(t, Check([]Subscriber{bad}, []Publisher{p}).Err(), ErrMisnamed)
}

func TestFailoverAfter_TheHoleAfterTheDeath(t *testing.T) {
	s := Subscriber{Name: "a", Ticks: []Tick{{Seq: 1, Ns: 10}, {Seq: 3, Ns: 20}, {Seq: 4, Ns: 100}, {Seq: 5, Ns: 120}, {Seq: 900, Ns: 700}, {Seq: 901, Ns: 710}}}
	f, ok := FailoverAfter(s, 110) // 5 was claimed before the death, delivered after
	require.True(t, ok)
	assert.Equal(t, uint64(5), f.LastOld.Seq)
	assert.Equal(t, uint64(900), f.FirstNew.Seq)
	assert.Equal(t, 580*time.Nanosecond, f.Took)
	f, ok = FailoverAfter(s, 15)
	require.True(t, ok, "the hole after seq 1")
	assert.Equal(t, uint64(3), f.FirstNew.Seq)
	_, ok = FailoverAfter(s, 5)
	assert.False(t, ok, "nothing delivered before")
	_, ok = FailoverAfter(s, 705)
	assert.False(t, ok, "no hole after the last one")

	s.Events = []Event{{Kind: uint8(ring.EventGap), From: 2, To: 2}, {Kind: uint8(ring.EventEpoch), From: 6, To: 899}}
	f, ok = FailoverAfter(s, 15)
	require.True(t, ok)
	assert.Equal(t, uint64(900), f.FirstNew.Seq, "the hole the epoch event names, not the gap before it")
	assert.Equal(t, uint64(899), f.Event.To)
}
