package subscriber

import (
	"context"
	"errors"
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

// askOnReconnect: onReconnect asks (a variable for a test of what Close
// asks by itself).
var askOnReconnect = true

// tailWait bounds the question Close asks the home.
const tailWait = 500 * time.Millisecond

// learnTail asks the topic's home for its counter after a publisher went
// without withdrawing, and gives it to the reader. Spawned (s.wg).
func (s *Subscriber) learnTail(gone bus.PublisherInfo) {
	defer s.wg.Done()
	ctx, cancel := s.untilClosed()
	defer cancel()
	ctx, tcancel := context.WithTimeout(ctx, 2*learnWait)
	defer tcancel()
	if c, ok := s.askTail(ctx, gone.Node); ok && s.setClaimed(c) {
		s.log.Info().Str("publisher", gone.Key()).Uint64("counter", c).
			Msg("subscriber: learnt the topic's counter after a publisher went; what of it does not come is named a gap")
	}
}

// askTail asks the nodes that may hold the topic's home (the one the last
// record names, then extra, then every known publisher's) for its counter.
func (s *Subscriber) askTail(ctx context.Context, extra bus.PeerInfo) (uint64, bool) {
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
		c, err := askHome(s, ctx, n)
		if err != nil {
			if !errors.Is(err, bus.ErrUnknownTarget) {
				s.log.Debug().Err(err).Str("node", n.ID).Msg("subscriber: ask the home for its counter")
			}
			continue
		}
		if c != 0 && c < ring.FenceAdd {
			return c, true
		}
	}
	return 0, false
}

// learnTailAtClose runs in Close before the subscription is withdrawn (so
// before any publisher stops writing to the ring because of it): without
// an attached journal (whose counter the reader READs itself) it asks the
// home for its counter, within tailWait.
func (s *Subscriber) learnTailAtClose() {
	if s.journalAt.Load() != 0 {
		return
	}
	if hi := s.home.Load(); hi == nil || hi.End != 0 {
		return // no home known, or its end is known already
	}
	ctx, cancel := context.WithTimeout(context.Background(), tailWait)
	defer cancel()
	if c, ok := s.askTail(ctx, bus.PeerInfo{}); ok {
		s.setClaimed(c)
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

// onReconnect: this node's connection to NATS is back. A publisher may
// have dropped the ring while the node was away and gone on publishing
// (or stopped): without a journal, whose counter the reader READs
// itself, ask the home for its counter. Spawned.
func (s *Subscriber) onReconnect() {
	if s.journalAt.Load() != 0 || !askOnReconnect {
		return
	}
	s.spawn(func() {
		defer s.wg.Done()
		ctx, cancel := s.untilClosed()
		defer cancel()
		ctx, tcancel := context.WithTimeout(ctx, 2*learnWait)
		defer tcancel()
		if c, ok := s.askTail(ctx, bus.PeerInfo{}); ok && s.setClaimed(c) {
			s.log.Info().Uint64("counter", c).Msg("subscriber: learnt the topic's counter after NATS came back; what of it does not come is named a gap")
		}
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
	if undelivered > 0 && undeliveredFrom < c {
		c = undeliveredFrom
	}
	if c <= next {
		return
	}
	h := &s.h
	if !h.joined {
		h.joinSkipped.Add(c - next)
		return
	}
	if epoch != 0 && epoch < c {
		ev := ring.Event{Kind: ring.EventEpoch, From: next, To: epoch - 1}
		s.tailEpoch.Add(ev.Count())
		if h.user != nil {
			h.user.OnEvent(ev)
		}
		next = epoch
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
