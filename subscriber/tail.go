package subscriber

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/ring"
)

// The tail: ticks a publisher claimed and never wrote into this ring,
// with nothing written after them. A publisher stops writing to a ring
// when it drops it (its queue pair failed, or it lost the subscriber's
// node on the bus), crashes or is fenced; if nobody writes after that, the
// reader's gap check finds nothing later in the ring and would wait in
// silence. So the subscriber learns the topic's counter and gives it to
// the reader (ring.Reader.SetClaimed), which names next..counter-1 as one
// gap once the gap timeout passed without them:
//
//   - from the home record a closing home leaves (bus.HomeInfo.End), which
//     the bus delivers (onHome) as soon as it is written, or after this
//     node's connection to NATS comes back;
//   - by asking the home for its counter (askHome) when a publisher goes
//     without withdrawing (its node timed out, left or restarted), and
//     when this node's connection to NATS comes back (onReconnect);
//   - from the journal's counter READ, which the reader makes itself
//     while a journal is attached;
//   - at Close, asked once more (bounded by tailWait) before the
//     subscription is withdrawn: what is still missing after the drain is
//     named there (Counters.Tail).
//
// Every bound is a counter value read while this ring was subscribed, so
// every sequence below it was claimed while it was; one that arrives
// after it was named is never delivered (the reader is past it), so
// nothing is counted twice.
//
// One case leaves no counter anywhere: the home closed while it could not
// write where its epoch ended (its node away from NATS, or JetStream
// unavailable for longer than the write's budget), or died, and there is
// no journal. Then the home record's reservation is the only bound that
// outlives it: the home handed out nothing at or above it, and the
// topic's next epoch starts there. So when no home answers and no node
// holds the topic's lease (the epoch is over: endedEpoch), the subscriber
// does what the next epoch's record would make it do, at once: the
// reader is told the epoch ended at the reservation (ring.Reader.SetEpoch)
// and names what it still misses below it as one ring.EventEpoch
// (Counters.Epoch), once the gap timeout passes without it; at Close,
// nameTail names it so. Some of that range may have been published and
// never written into this ring: which part, nobody can know any more, so
// it is named the ended epoch's, as a crashed home's last claims are, and
// logged as a warning saying so. While the lease is still held (a home
// that cannot answer yet) the subscriber asks again every tailRetry.

// onHomeRecord keeps the newest home record, and gives the reader the
// counter a closing home ended at, before onHome handles the epoch.
func (s *Subscriber) onHomeRecord(hi bus.HomeInfo) {
	if old := s.home.Load(); old == nil || hi.Epoch >= old.Epoch {
		s.home.Store(&hi)
	}
	if hi.End != 0 && s.setClaimed(hi.End) {
		s.log.Debug().Uint64("epoch", hi.Epoch).Uint64("end", hi.End).Msg("subscriber: the topic's home closed; its epoch ended here")
	}
	s.onHome(hi)
}

// noAskOnReconnect: onReconnect does not ask (set by a test of what Close
// asks by itself; atomic, as askHook).
var noAskOnReconnect atomic.Bool

// tailWait bounds the question Close asks the home.
const tailWait = 500 * time.Millisecond

// learnTail asks the topic's home for its counter after a publisher went
// without withdrawing, and gives it to the reader; with no home to answer,
// it looks whether the epoch ended without a counter (untilEnded).
// Spawned (s.wg).
func (s *Subscriber) learnTail(gone bus.PublisherInfo) {
	defer s.wg.Done()
	s.learnCounter(gone.Node, "after publisher "+gone.Key()+" went")
}

// learnCounter asks the home (extra too: askTail) for the topic's counter
// and gives it to the reader, logged with when; with no home to answer,
// it looks whether the epoch ended without a counter (untilEnded).
func (s *Subscriber) learnCounter(extra bus.PeerInfo, when string) {
	ctx, cancel := s.untilClosed()
	defer cancel()
	tctx, tcancel := context.WithTimeout(ctx, 2*learnWait)
	defer tcancel()
	hc, ok := s.askTail(tctx, extra)
	if !ok {
		s.untilEnded(ctx)
		return
	}
	if s.setCounter(hc) {
		s.log.Info().Str("peer", extra.ID).Uint64("counter", hc.Next).Uint64("epoch_start", hc.Start).
			Msg("subscriber: learnt the topic's counter " + when + "; what of it does not come is named a gap")
	}
}

// tailRetry is how often untilEnded looks again while the topic's lease
// is held by a home that does not answer.
const tailRetry = time.Second

// homeFinder is the part of the bus that says who holds a topic's lease
// and what its home record says now (a *bus.Node has it).
type homeFinder interface {
	FindHome(ctx context.Context, topic string) (bus.HomeInfo, error)
	HomeRecord(ctx context.Context, topic string) (bus.HomeInfo, bool, error)
}

// endedEpoch reports the reservation of the last home record this
// subscriber knows when that epoch is over without a recorded end: the
// record has no End, and nobody holds the topic's lease (bus.ErrNoHome;
// any other answer, JetStream away included, says nothing).
func (s *Subscriber) endedEpoch(ctx context.Context) (uint64, bool) {
	hi := s.home.Load()
	fh, ok := s.node.(homeFinder)
	if hi == nil || hi.End != 0 || hi.Reserved <= hi.Start || !ok || s.journalAt.Load() != 0 {
		return 0, false
	}
	if _, err := fh.FindHome(ctx, s.cfg.Topic); !errors.Is(err, bus.ErrNoHome) {
		return 0, false
	}
	// The record this subscriber holds may be stale: back from a NATS
	// outage, its watcher delivers what was written meanwhile only once it
	// has restarted (a home that closed cleanly in the outage wrote its End
	// there; taking its epoch for one that ended without one named what
	// the ring missed the ended epoch's instead of lost: the multihost
	// NATS-server-dies test, in CI). So the record is read afresh.
	cur, ok, err := fh.HomeRecord(ctx, s.cfg.Topic)
	if err != nil || !ok {
		return 0, false
	}
	if cur.Epoch == hi.Epoch && cur.End != 0 && s.setClaimed(cur.End) {
		s.log.Info().Uint64("epoch", cur.Epoch).Uint64("end", cur.End).
			Msg("subscriber: the topic's home closed while this node was away; its epoch ended here, and what of it does not come is named a gap")
	}
	if cur.Epoch != hi.Epoch || cur.End != 0 {
		return 0, false // a newer record, or this epoch's end: the watcher delivers it too
	}
	if now := s.home.Load(); now.Epoch != hi.Epoch || now.End != 0 {
		return 0, false // a newer record (a new epoch, or the end) came meanwhile: it says more
	}
	return hi.Reserved, true
}

// untilEnded looks, every tailRetry until ctx ends, a newer home record
// comes or a home answers, whether the epoch ended without a counter; if
// so the reader is told it ended at its reservation (see the top of this
// file). One runs at a time.
func (s *Subscriber) untilEnded(ctx context.Context) {
	hi := s.home.Load()
	if hi == nil || s.journalAt.Load() != 0 || !s.endWatch.CompareAndSwap(false, true) {
		return // no epoch known; or the reader READs the journal's counter itself; or one runs
	}
	defer s.endWatch.Store(false)
	for {
		if r, ok := s.endedEpoch(ctx); ok {
			s.endEpochAt(r)
			return
		}
		if now := s.home.Load(); now.Epoch != hi.Epoch || now.End != 0 {
			return // a new epoch, or the end: the record says it
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tailRetry):
		}
		if hc, ok := s.askTail(ctx, bus.PeerInfo{}); ok {
			s.setCounter(hc)
			return
		}
	}
}

// endEpochAt tells the reader the epoch it reads ended at reserved at
// the latest (it names what it misses below it as the ended epoch's), and
// Close to name what is left then (nameTail).
func (s *Subscriber) endEpochAt(reserved uint64) {
	if s.h.joinedAt.Load() == 0 { // still joining: nothing below was this ring's (setClaimed)
		return
	}
	s.endedAt.Store(reserved)
	s.reader.SetEpoch(reserved, reserved)
	if next := s.reader.Next(); next < reserved {
		s.log.Warn().Uint64("from", next).Uint64("reserved", reserved).
			Msg("subscriber: the topic's home is gone without telling where its epoch ended, and nobody holds the topic's lease: what the ring misses below the epoch's reservation is named the ended epoch's (an EventEpoch); some of it may have been published and never written here")
	}
}

// askTail asks the nodes that may hold the topic's home (the one the last
// record names, then extra, then every known publisher's) for its counter.
func (s *Subscriber) askTail(ctx context.Context, extra bus.PeerInfo) (homeCounter, bool) {
	var nodes []bus.PeerInfo
	if hi := s.home.Load(); hi != nil && hi.End == 0 {
		nodes = append(nodes, hi.Node)
	}
	if extra.ID != "" {
		nodes = append(nodes, extra)
	}
	for _, p := range s.publishers() {
		nodes = append(nodes, p.Node)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.ID] || ctx.Err() != nil {
			continue
		}
		seen[n.ID] = true
		hc, err := askHome(s, ctx, n)
		if err != nil {
			if !errors.Is(err, bus.ErrUnknownTarget) {
				s.log.Debug().Err(err).Str("node", n.ID).Msg("subscriber: ask the home for its counter")
			}
			continue
		}
		return hc, true // decodeCounter refused a fenced home's
	}
	return homeCounter{}, false
}

// learnTailAtClose runs in Close before the subscription is withdrawn (so
// before any publisher stops writing to the ring because of it): without
// an attached journal (whose counter the reader READs itself) it asks the
// home for its counter, within tailWait, whether or not its record has
// reached this subscriber yet.
func (s *Subscriber) learnTailAtClose() {
	if s.journalAt.Load() != 0 {
		return
	}
	hi := s.home.Load()
	if hi != nil && hi.End != 0 {
		return // its end is known already (onHomeRecord gave it the reader)
	}
	if hi == nil && s.h.joinedAt.Load() == 0 { // pairs with the Store in recHandler.OnTicks
		return // no home heard of and nothing delivered: no tail to name
	}
	// No record yet (its watcher is slow, or was away with this node's
	// NATS connection) is no reason to close silent: askTail asks every
	// known publisher's node too.
	ctx, cancel := context.WithTimeout(context.Background(), tailWait)
	defer cancel()
	if hc, ok := s.askTail(ctx, bus.PeerInfo{}); ok {
		s.setCounter(hc)
	} else if r, ok := s.endedEpoch(ctx); ok {
		s.endEpochAt(r)
	} else {
		// Nothing can be named past the last tick delivered: say so,
		// rather than close as if that were the topic's end. (Head, an
		// atomic load: the poller may still run.)
		s.tailUnknown.Store(true)
		s.log.Warn().Dur("waited", tailWait).Uint64("head", s.reader.Head()).
			Msg("subscriber: closing without the topic's counter (no home answered, no ended epoch known); ticks published after the last one delivered cannot be named")
	}
}

// setClaimed gives the reader the topic's counter, once the ring has
// delivered a tick: before that, the ring is still joining (learnStart
// moves it to the counter itself), and nothing below the counter was
// this ring's. It reports whether it did.
func (s *Subscriber) setClaimed(c uint64) bool {
	if s.h.joinedAt.Load() == 0 { // pairs with the Store in recHandler.OnTicks
		return false
	}
	s.reader.SetClaimed(c)
	return true
}

// setCounter is setClaimed for a home's answer. The home that answers may
// be a new epoch's, heard before its record reached this node (its
// predecessor was killed, and this node's JetStream watcher is slow): its
// counter is then its epoch's start, or a little past it, and what the
// ring misses below that start is the ended epoch's unused range, not a
// loss. So the reader learns the answering home's start first (it is
// every home's, and harmless when the reader knows it or is past it), and
// judges the bound as a new epoch's counter. (The chaos test, in CI, saw
// a reliable subscriber name 25284385..29360128, 4 M sequences, a gap
// after its home was killed: more than were ever claimed.) The counter is
// also the reservation bound it gives: no sequence at or above it was
// handed out. The start was given as the bound before, and a reader that
// had heard no home record then held the bound 1, its mark for awaiting
// the first epoch, under which no counter is believed: Close named no
// tail, and said nothing.
func (s *Subscriber) setCounter(hc homeCounter) bool {
	if s.h.joinedAt.Load() == 0 { // pairs with the Store in recHandler.OnTicks
		return false
	}
	if hc.Start != 0 {
		s.reader.SetEpoch(hc.Start, hc.Next)
	}
	s.reader.SetClaimed(hc.Next)
	return true
}

// onReconnect: this node's connection to NATS is back. A publisher may
// have dropped the ring while the node was away and gone on publishing
// (or stopped): without a journal, whose counter the reader READs
// itself, ask the home for its counter. Spawned.
func (s *Subscriber) onReconnect() {
	if s.journalAt.Load() != 0 || noAskOnReconnect.Load() {
		return
	}
	s.spawn(func() {
		defer s.wg.Done()
		s.learnCounter(bus.PeerInfo{}, "after NATS came back")
	})
}

// nameTail runs in Close after the drain, on the polling goroutine's
// behalf (Run has returned): sequences below the counter the reader was
// given that it has neither delivered nor named are named now, as one
// ring.EventGap to the handler, counted in Counters.Tail (part of Lost);
// or, while a publisher is still joining the ring, as ring.EventJoin
// (Counters.Join), as the reader's own losses are then. Before the ring's
// first tick they were never this ring's: counted in BeforeJoin. Ticks
// that Undelivered counted are left out. The bound is judged as the
// reader's gap check judges it (ring.Reader.ClaimedTail): an ended
// epoch's unused range below a new epoch's counter is one
// ring.EventEpoch (Counters.Epoch), not a loss.
func (s *Subscriber) nameTail(undeliveredFrom uint64, undelivered uint64) {
	next, epoch, c := s.reader.ClaimedTail()
	if c == 0 {
		s.refusedTail(next)
	}
	if undelivered > 0 && undeliveredFrom < c {
		c = undeliveredFrom
	}
	if c <= next {
		s.nameEnded(next, undeliveredFrom, undelivered)
		return
	}
	h := &s.h
	if !h.joined {
		h.joinSkipped.Add(c - next)
		return
	}
	if epoch != 0 && epoch <= c {
		ev := ring.Event{Kind: ring.EventEpoch, From: next, To: epoch - 1}
		s.tailEpoch.Add(ev.Count())
		if h.user != nil {
			h.user.OnEvent(ev)
		}
		if next = epoch; next >= c {
			return // the counter was the new epoch's start: nothing of it was claimed
		}
	}
	ev := ring.Event{Kind: ring.EventGap, From: next, To: c - 1}
	if h.joining.Load() && time.Now().UnixNano() < h.joinDeadline.Load() {
		ev.Kind = ring.EventJoin
		s.tailJoin.Add(ev.Count())
	} else {
		s.tail.Add(ev.Count())
	}
	s.log.Warn().Uint64("from", ev.From).Uint64("to", ev.To).Stringer("kind", ev.Kind).
		Msg("subscriber: closed short of the topic's counter: these ticks were claimed while the ring was subscribed and never written into it; named")
	if h.user != nil {
		h.user.OnEvent(ev)
	}
}

// refusedTail, in Close when the reader holds a counter past next that
// it does not believe (past the reservation it knows for its epoch, which
// may be stale, or from a home it cannot place): what was published past
// next can be neither named nor ruled out, so Close says so
// (Counters.TailUnknown) rather than close as if next were the topic's
// end. An ended epoch's reservation at or past the counter is named by
// nameEnded instead.
func (s *Subscriber) refusedTail(next uint64) {
	cl := s.reader.Claimed()
	if cl <= next || cl >= ring.FenceAdd || cl <= s.endedAt.Load() || !s.h.joined {
		return
	}
	s.tailUnknown.Store(true)
	s.log.Warn().Uint64("next", next).Uint64("counter", cl).
		Msg("subscriber: closing with a counter past the last tick that the reader cannot place in its epoch; ticks published after the last one delivered cannot be named")
}

// nameEnded, in Close when no counter bounds the tail: an epoch known to
// have ended without one (endEpochAt) whose reservation the reader has
// not reached is named there as one ring.EventEpoch (Counters.Epoch),
// below any ticks Undelivered counted.
func (s *Subscriber) nameEnded(next, undeliveredFrom, undelivered uint64) {
	end := s.endedAt.Load()
	if undelivered > 0 && undeliveredFrom < end {
		end = undeliveredFrom
	}
	if end <= next || !s.h.joined {
		return
	}
	ev := ring.Event{Kind: ring.EventEpoch, From: next, To: end - 1}
	s.tailEpoch.Add(ev.Count())
	s.log.Warn().Uint64("from", ev.From).Uint64("to", ev.To).
		Msg("subscriber: closed short of an epoch that ended without telling where: named the ended epoch's; some of it may have been published")
	if s.h.user != nil {
		s.h.user.OnEvent(ev)
	}
}
