package chaos

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tickbus/tickbus/ring"
)

// What Check finds wrong. Test them with errors.Is on Report.Err.
var (
	// ErrDuplicate: a subscriber delivered one sequence more than once.
	ErrDuplicate = errors.New("chaos: sequence delivered twice")
	// ErrSilentHole: a sequence between a subscriber's first and last
	// delivered tick was neither delivered nor named by an event.
	ErrSilentHole = errors.New("chaos: sequence neither delivered nor named (silent loss)")
	// ErrDoubleNamed: two events of one subscriber named the same sequence.
	ErrDoubleNamed = errors.New("chaos: sequence named by two events")
	// ErrDeliveredAndNamed: a subscriber delivered a sequence and an event
	// of its own also named it lost.
	ErrDeliveredAndNamed = errors.New("chaos: sequence delivered and named by an event")
	// ErrOrder: a subscriber delivered a lower sequence after a higher one,
	// or one tick was delivered at two different sequences (so two
	// subscribers, or one, saw the ticks in different orders).
	ErrOrder = errors.New("chaos: ticks delivered in different orders")
	// ErrTwoTicks: one sequence carried two different ticks (two
	// publishers recorded it, or subscribers delivered different ticks at
	// it, or a delivered tick differs from what its publisher recorded).
	ErrTwoTicks = errors.New("chaos: one sequence carried two different ticks")
	// ErrUnpublished: a subscriber delivered a tick no publisher recorded
	// (beyond what a killed publisher could not record before it died).
	ErrUnpublished = errors.New("chaos: tick delivered that no publisher published")
	// ErrMisnamed: a subscriber's gap, overrun and corrupt events named
	// more sequences than the publishers ever claimed: sequences that were
	// never handed out (an ended epoch's unused reservation) must be named
	// by the event of their own kind (ring.EventEpoch), once.
	ErrMisnamed = errors.New("chaos: more sequences named lost than were ever claimed")
)

// claimSlack bounds what a killed publisher may have claimed but not
// recorded: one publish in flight, at most a batch.
const claimSlack = 64

// Tick is a tick as a record names it.
type Tick struct {
	Seq       uint64
	Publisher uint32
	Hash      uint64 // Hash of the payload
	Ns        int64
}

// Event is a subscriber's event as recorded.
type Event struct {
	Kind     uint8 // ring.EventKind
	From, To uint64
	Ns       int64
}

// Subscriber is what one subscriber delivered and was told, in the order
// it happened.
type Subscriber struct {
	Name   string
	Ticks  []Tick
	Events []Event
}

// Publisher is what one publisher process (one PublisherID) published.
// Complete says its record is whole (it exited by itself); a killed
// publisher's record may lack its last ticks, which it published but did
// not get to record.
type Publisher struct {
	Name      string
	ID        uint32
	Published []Tick // Publish returned these sequences
	Failed    []Tick // Publish returned an error for these (Seq may be 0)
	Complete  bool
}

// SubscriberFrom builds a Subscriber from its record file's records.
func SubscriberFrom(name string, recs []Record) (Subscriber, error) {
	s := Subscriber{Name: name}
	for i, r := range recs {
		switch r.Kind {
		case KindDelivered:
			s.Ticks = append(s.Ticks, Tick{Seq: r.A, Publisher: r.Publisher, Hash: r.B, Ns: r.Ns})
		case KindEvent:
			s.Events = append(s.Events, Event{Kind: r.Sub, From: r.A, To: r.B, Ns: r.Ns})
		default:
			return s, fmt.Errorf("%w: %s: record %d: kind %q in a subscriber's record", ErrBadRecord, name, i, r.Kind)
		}
	}
	return s, nil
}

// PublisherFrom builds a Publisher from its record file's records.
func PublisherFrom(name string, id uint32, complete bool, recs []Record) (Publisher, error) {
	p := Publisher{Name: name, ID: id, Complete: complete}
	for i, r := range recs {
		if r.Publisher != id {
			return p, fmt.Errorf("%w: %s: record %d: publisher %d, want %d", ErrBadRecord, name, i, r.Publisher, id)
		}
		t := Tick{Seq: r.A, Publisher: r.Publisher, Hash: r.B, Ns: r.Ns}
		switch r.Kind {
		case KindPublished:
			p.Published = append(p.Published, t)
		case KindFailed:
			p.Failed = append(p.Failed, t)
		default:
			return p, fmt.Errorf("%w: %s: record %d: kind %q in a publisher's record", ErrBadRecord, name, i, r.Kind)
		}
	}
	return p, nil
}

// SubscriberReport sums up one subscriber.
type SubscriberReport struct {
	Name        string
	First, Last uint64 // first and last delivered sequence (0, 0: none)
	Delivered   int
	Named       uint64 // sequences within First..Last named by events
	Events      int
	// ByKind counts events and the sequences they name, per ring.EventKind.
	ByKind map[uint8][2]uint64
}

// Report is what Check found.
type Report struct {
	Subscribers []SubscriberReport
	Published   int // ticks the publishers recorded
	// UnrecordedTail counts delivered ticks a killed publisher published
	// after its last record (it died before recording them);
	// LandedDespiteError those whose Publish returned an error but which
	// landed. Neither is a fault of the bus; both are listed.
	UnrecordedTail     int
	LandedDespiteError int
	Problems           []error // each wraps one of the Err values above
}

// Err is nil when nothing is wrong, else the problems (the first 20 of
// each kind), joined.
func (r *Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	per := map[error]int{}
	var keep []error
	for _, p := range r.Problems {
		k := kindOf(p)
		per[k]++
		if per[k] <= 20 {
			keep = append(keep, p)
		}
	}
	for k, n := range per {
		if n > 20 {
			keep = append(keep, fmt.Errorf("%w: %d more", k, n-20))
		}
	}
	return errors.Join(keep...)
}

func kindOf(err error) error {
	for _, k := range []error{ErrDuplicate, ErrSilentHole, ErrDoubleNamed, ErrDeliveredAndNamed, ErrOrder, ErrTwoTicks, ErrUnpublished, ErrMisnamed} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

func (r *Report) fail(kind error, format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...)))
}

// String sums the report up in a few lines.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "published %d ticks (recorded); %d delivered after a killed publisher's last record; %d landed though Publish failed; %d problems",
		r.Published, r.UnrecordedTail, r.LandedDespiteError, len(r.Problems))
	for _, s := range r.Subscribers {
		fmt.Fprintf(&b, "\n  %s: delivered %d, %d..%d, %d events naming %d sequences within;", s.Name, s.Delivered, s.First, s.Last, s.Events, s.Named)
		for k := range uint8(255) {
			if c, ok := s.ByKind[k]; ok {
				fmt.Fprintf(&b, " %s %d (%d seqs)", ring.EventKind(k), c[0], c[1])
			}
		}
	}
	return b.String()
}

// Summary is String followed by the first n problems, one a line (and
// how many more there are): the last thing a failed chaos test prints, so
// that a CI log cut to its head and tail still shows what went wrong.
func (r *Report) Summary(n int) string {
	var b strings.Builder
	b.WriteString(r.String())
	for i, p := range r.Problems {
		if i == n {
			fmt.Fprintf(&b, "\n  … and %d more problems", len(r.Problems)-n)
			break
		}
		fmt.Fprintf(&b, "\n  problem %d: %v", i+1, p)
	}
	return b.String()
}

// ident names a tick: who published it and its payload's hash (the
// payload carries the publish time, so two ticks never share it).
type ident struct {
	pub  uint32
	hash uint64
}

func (i ident) String() string { return fmt.Sprintf("publisher %d hash %016x", i.pub, i.hash) }

// owner is the tick first seen at a sequence, and who showed it.
type owner struct {
	id        ident
	who       string
	published bool // a publisher recorded it
}

type pubIndex struct {
	complete bool
	last     uint64          // highest sequence it recorded
	failed   map[uint64]bool // hashes of ticks whose Publish failed
}

// Check proves the promise over the records; see the package doc.
func Check(subs []Subscriber, pubs []Publisher) *Report {
	r := &Report{}
	seqs := map[uint64]owner{}
	pubByID := map[uint32]*pubIndex{}
	var claimed uint64 // at most: every sequence a publisher may have claimed
	for _, p := range pubs {
		claimed += uint64(len(p.Published) + len(p.Failed))
		if !p.Complete {
			claimed += claimSlack
		}
		pi := pubByID[p.ID]
		if pi == nil {
			pi = &pubIndex{complete: p.Complete, failed: map[uint64]bool{}}
			pubByID[p.ID] = pi
		}
		for _, t := range p.Failed {
			pi.failed[t.Hash] = true
		}
		for _, t := range p.Published {
			r.Published++
			id := ident{t.Publisher, t.Hash}
			if o, ok := seqs[t.Seq]; ok && o.id != id {
				r.fail(ErrTwoTicks, "seq %d handed out twice: %s recorded %s, %s recorded %s", t.Seq, o.who, o.id, p.Name, id)
				continue
			}
			seqs[t.Seq] = owner{id: id, who: p.Name, published: true}
			pi.last = max(pi.last, t.Seq)
		}
	}
	type place struct {
		seq uint64
		who string
	}
	at := map[ident]place{} // tick → the sequence it was first delivered at, and by whom
	for _, s := range subs {
		sr := checkOne(r, s)
		r.Subscribers = append(r.Subscribers, sr)
		var lost uint64
		for _, k := range []ring.EventKind{ring.EventGap, ring.EventOverrun, ring.EventCorrupt} {
			lost = addSat(lost, sr.ByKind[uint8(k)][1])
		}
		if lost > claimed {
			r.fail(ErrMisnamed, "%s: gap, overrun and corrupt events named %d sequences; the publishers claimed at most %d (events by kind: %v)", s.Name, lost, claimed, sr.ByKind)
		}
		for _, t := range s.Ticks {
			id := ident{t.Publisher, t.Hash}
			if q, ok := at[id]; ok && q.seq != t.Seq {
				r.fail(ErrOrder, "%s delivered %s at seq %d, %s at seq %d", s.Name, id, t.Seq, q.who, q.seq)
			} else if !ok {
				at[id] = place{t.Seq, s.Name}
			}
			o, ok := seqs[t.Seq]
			if ok && o.id != id {
				r.fail(ErrTwoTicks, "seq %d: %s delivered %s, %s has %s", t.Seq, s.Name, id, o.who, o.id)
				continue
			}
			if ok && o.published {
				continue
			}
			if !ok {
				seqs[t.Seq] = owner{id: id, who: s.Name}
			}
			pi := pubByID[t.Publisher]
			switch {
			case pi == nil:
				r.fail(ErrUnpublished, "%s delivered seq %d from publisher %d, which no record names", s.Name, t.Seq, t.Publisher)
			case ok:
				// Counted when first seen.
			case pi.failed[t.Hash]:
				r.LandedDespiteError++
			case !pi.complete && t.Seq > pi.last:
				r.UnrecordedTail++
			default:
				r.fail(ErrUnpublished, "%s delivered seq %d (%s), which its publisher never recorded", s.Name, t.Seq, id)
			}
		}
	}
	return r
}

// span is a run of sequences a subscriber accounted for: one delivered
// tick or one event's range.
type span struct {
	from, to uint64
	event    bool
}

// checkOne checks one subscriber on its own: order of delivery, and every
// sequence from its first to its last delivered exactly once or named by
// exactly one event.
func checkOne(r *Report, s Subscriber) SubscriberReport {
	sr := SubscriberReport{Name: s.Name, Delivered: len(s.Ticks), Events: len(s.Events), ByKind: map[uint8][2]uint64{}}
	if len(s.Ticks) > 0 {
		sr.First, sr.Last = s.Ticks[0].Seq, s.Ticks[0].Seq
	}
	for i, t := range s.Ticks {
		sr.First, sr.Last = min(sr.First, t.Seq), max(sr.Last, t.Seq)
		if i > 0 && t.Seq < s.Ticks[i-1].Seq {
			r.fail(ErrOrder, "%s delivered seq %d after seq %d", s.Name, t.Seq, s.Ticks[i-1].Seq)
		}
	}
	spans := make([]span, 0, len(s.Ticks)+len(s.Events))
	for _, t := range s.Ticks {
		spans = append(spans, span{from: t.Seq, to: t.Seq})
	}
	for _, e := range s.Events {
		if e.From > e.To {
			r.fail(ErrDoubleNamed, "%s: event %d..%d runs backwards", s.Name, e.From, e.To)
			continue
		}
		spans = append(spans, span{from: e.From, to: e.To, event: true})
		k := sr.ByKind[e.Kind]
		k[0]++
		c := e.To - e.From + 1
		if c == 0 { // the whole range, wrapped
			c = math.MaxUint64
		}
		k[1] = addSat(k[1], c)
		sr.ByKind[e.Kind] = k
		if len(s.Ticks) > 0 && e.To >= sr.First && e.From <= sr.Last {
			sr.Named += min(e.To, sr.Last) - max(e.From, sr.First) + 1
		}
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var (
		next    uint64 // first sequence not yet accounted for
		end     bool   // accounted up to math.MaxUint64
		started bool
		prev    span // the span that reached furthest
	)
	for _, sp := range spans {
		if started && (end || sp.from < next) {
			switch {
			case sp.event && prev.event:
				r.fail(ErrDoubleNamed, "%s: seq %d named by events %d..%d and %d..%d", s.Name, sp.from, prev.from, prev.to, sp.from, sp.to)
			case sp.event || prev.event:
				r.fail(ErrDeliveredAndNamed, "%s: seq %d delivered and named by an event (%d..%d, %d..%d)", s.Name, sp.from, prev.from, prev.to, sp.from, sp.to)
			default:
				r.fail(ErrDuplicate, "%s delivered seq %d twice", s.Name, sp.from)
			}
		}
		if started && !end && sp.from > next && len(s.Ticks) > 0 {
			lo, hi := max(next, sr.First), min(sp.from-1, sr.Last)
			if lo <= hi {
				r.fail(ErrSilentHole, "%s: seq %d..%d (%d) neither delivered nor named", s.Name, lo, hi, hi-lo+1)
			}
		}
		if !started || (!end && sp.to >= next) {
			prev = sp
			if sp.to == math.MaxUint64 {
				end = true
			} else {
				next = sp.to + 1
			}
		}
		started = true
	}
	return sr
}

// Failover is one change of epoch as a subscriber saw it: the event that
// named the old epoch's unused sequences, the last tick delivered before
// them (through the old home) and the first after (through the new one).
type Failover struct {
	Event             Event
	LastOld, FirstNew Tick
	// Took is from the old home's last tick to the new home's first, as
	// delivered here.
	Took time.Duration
}

// Failovers lists the epoch changes s saw that have a tick on both sides.
func Failovers(s Subscriber) []Failover {
	var out []Failover
	for _, e := range s.Events {
		if e.Kind != uint8(ring.EventEpoch) {
			continue
		}
		after := sort.Search(len(s.Ticks), func(i int) bool { return s.Ticks[i].Seq > e.To })
		before := sort.Search(len(s.Ticks), func(i int) bool { return s.Ticks[i].Seq >= e.From }) - 1
		if before < 0 || after >= len(s.Ticks) {
			continue
		}
		f := Failover{Event: e, LastOld: s.Ticks[before], FirstNew: s.Ticks[after]}
		f.Took = time.Duration(f.FirstNew.Ns - f.LastOld.Ns)
		out = append(out, f)
	}
	return out
}

func addSat(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

// FailoverAfter finds the failover that followed a home's death at ns
// (when no tick can be claimed through it any more): the first hole in
// s's delivered sequences after its last tick delivered by then, within
// 30s, that an epoch event names (Event), or without one the first hole.
// A new home's counter starts above the old one's reservation, so its
// first tick follows a hole; ticks claimed through the old home and
// delivered later are before it.
func FailoverAfter(s Subscriber, ns int64) (Failover, bool) {
	j := sort.Search(len(s.Ticks), func(i int) bool { return s.Ticks[i].Ns > ns }) - 1
	if j < 0 {
		return Failover{}, false
	}
	// The first hole that holds an epoch event's range, if the subscriber
	// was told of one; else the first hole.
	var first *Failover
	for k := j + 1; k < len(s.Ticks) && s.Ticks[k].Ns-ns < int64(30*time.Second); k++ {
		if s.Ticks[k].Seq <= s.Ticks[k-1].Seq+1 {
			continue
		}
		f := Failover{LastOld: s.Ticks[k-1], FirstNew: s.Ticks[k]}
		f.Took = time.Duration(f.FirstNew.Ns - f.LastOld.Ns)
		for _, e := range s.Events {
			if e.Kind == uint8(ring.EventEpoch) && e.From > f.LastOld.Seq && e.To < f.FirstNew.Seq {
				f.Event = e
				return f, true
			}
		}
		if first == nil {
			first = &f
		}
	}
	if first == nil {
		return Failover{}, false
	}
	return *first, true
}
