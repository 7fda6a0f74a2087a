package subscriber

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/ring"
)

// maybeStart moves a ring that has delivered nothing to the start
// learnStart found (polling goroutine), once no publisher is between
// learning it and being answered, and none is still learning it in the
// background (learnLate). It reports false while one is: the ring must
// not be polled until the start is known. A restart (unstick) applies on
// top of the start, and what it passes over from there is counted.
// Neither moves the ring past a tick a publisher already wrote into it.
func (s *Subscriber) maybeStart() bool {
	if s.accepting.Load() != 0 { // pairs with the Adds in learnStart and learnLate
		return false
	}
	// A counter learnt late (learnLate), or again by unstick, is above what
	// publishers wrote into the ring while it was held: FirstWritten starts
	// it at the first of those, so they are delivered, not passed over (a
	// counter learnt in time is below all the ring holds).
	//
	// A tick claimed below that start and still on its way when it was
	// chosen (a WRITE in flight, a publish under way as its publisher
	// added the ring) lands below the reader: the reader watches for such
	// ticks for belowWatch and counts them in BeforeJoin (it used to count
	// them nowhere).
	if v := s.startAt.Load(); v > s.reader.Next() { // pairs with the CAS in learn
		from := s.reader.Next()
		if v = s.reader.FirstWritten(v); v > from { // already there: nothing to move
			if err := s.reader.StartAt(v); err == nil {
				s.h.startedAt.Store(v)
				s.reader.WatchBelow(from, belowWatch)
			}
		}
	}
	if v := s.restartAt.Load(); v > s.reader.Next() { // pairs with the Store in unstick
		v = s.reader.FirstWritten(v)
		if skipped := v - s.reader.Next(); skipped > 0 {
			if err := s.reader.StartAt(v); err == nil {
				s.h.startedAt.Store(v)
				s.h.joinSkipped.Add(skipped) // counted as lost while joining, never silent
			}
		}
	}
	return true
}

// belowWatch is how long a reader moved to its start watches for ticks
// landing below it: twice the tcp provider's default AckTimeout, after
// which a WRITE still unanswered has failed its queue pair (shm lands at
// once).
const belowWatch = 10 * time.Second

// learnWait bounds learnStart inside accept: the publisher's connect waits
// for its reply.
const learnWait = time.Second

// learnGiveUp is how long learnLate asks before the ring starts at 1, as
// it would with no home at all: the journal recovers what it holds and the
// reader names the rest before the first tick, counted in BeforeJoin.
// (A variable for tests.)
var learnGiveUp = 30 * time.Second

// askFunc asks a node for the home's counter.
type askFunc func(*Subscriber, context.Context, bus.PeerInfo) (homeCounter, error)

// askHook, when set, is what askHome asks instead of askCounter: tests
// make the home slow or silent. Atomic, because a test swaps it while
// subscribers' goroutines ask.
var askHook atomic.Pointer[askFunc]

// askHome is how learn and unstick ask a node for the home's counter.
func askHome(s *Subscriber, ctx context.Context, n bus.PeerInfo) (homeCounter, error) {
	if f := askHook.Load(); f != nil {
		return (*f)(s, ctx, n)
	}
	return s.askCounter(ctx, n)
}

// setAskHook sets askHook to f (nil: askCounter) and returns what restores
// the one before.
func setAskHook(f askFunc) (restore func()) {
	var p *askFunc
	if f != nil {
		p = &f
	}
	old := askHook.Swap(p)
	return func() { askHook.Store(old) }
}

// learnStart runs in accept, before the publisher is answered, so before
// it can add the ring: it asks the topic's home for its counter. Nothing
// below that counter can be written into this ring by this publisher, so a
// ring joining a running topic starts there (the minimum over publishers
// connecting together). The home lives with a publisher: the one
// connecting, or one already known. If the home does not answer within
// learnWait, the publisher is answered anyway and the ring stays held
// (Poll delivers nothing) while learnLate asks again.
func (s *Subscriber) learnStart(ctx context.Context, from bus.PeerInfo) {
	s.accepting.Add(1)
	ctx, cancel := context.WithTimeout(ctx, learnWait) // leave the publisher's connect time to finish
	defer cancel()
	if s.learn(ctx, from) {
		s.accepting.Add(-1)
		return
	}
	s.log.Warn().Dur("waited", learnWait).Str("publisher_node", from.ID).
		Msg("subscriber: the topic's home has not told its counter yet; the ring delivers nothing until it does")
	// (if the subscriber is closing, spawn runs nothing and the ring stays
	// held: nothing polls it any more)
	s.spawn(func() { s.learnLate(from) })
}

// learnLate asks the topic's home for its counter until it answers, the
// subscriber closes, or learnGiveUp passes, then lets the ring start (it
// holds one count of s.accepting, taken by learnStart). A counter learnt
// late is at or above every sequence this publisher wrote before: the
// ring starts at the first sequence written into it meanwhile, or at the
// counter if none was (maybeStart), so nothing the publisher wrote into
// the held ring is passed over. (It used to start at the counter: the
// CLI's cluster test saw a subscriber on a loaded CI host pass over the
// topic's first two ticks, counted nowhere.)
func (s *Subscriber) learnLate(from bus.PeerInfo) {
	defer s.wg.Done()
	defer s.accepting.Add(-1) // after startAt is stored: pairs with the Load in maybeStart
	ctx, cancel := s.untilClosed()
	defer cancel()
	begun := time.Now()
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 2*learnWait)
		ok := s.learn(actx, from)
		acancel()
		if ok {
			s.log.Warn().Uint64("seq", s.startAt.Load()).Dur("after", time.Since(begun)+learnWait).
				Msg("subscriber: learnt the topic's home's counter late; the ring starts at the first tick written into it meanwhile, or there")
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(begun) >= learnGiveUp {
			s.log.Error().Dur("after", time.Since(begun)+learnWait).
				Msg("subscriber: the topic's home never told its counter; the ring starts at sequence 1")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(min(attempt, 10)) * 100 * time.Millisecond):
		}
	}
}

// learn asks the home, on the publisher's node or any known publisher's,
// for its counter and lowers s.startAt to it; false if none answered.
func (s *Subscriber) learn(ctx context.Context, from bus.PeerInfo) bool {
	nodes := []bus.PeerInfo{from}
	for _, p := range s.publishers() {
		if p.Node.ID != from.ID {
			nodes = append(nodes, p.Node)
		}
	}
	for _, n := range nodes {
		hc, err := askHome(s, ctx, n)
		if err != nil {
			if !errors.Is(err, bus.ErrUnknownTarget) {
				s.log.Debug().Err(err).Str("node", n.ID).Msg("subscriber: ask the home for its counter")
			}
			continue
		}
		c := hc.Next
		for {
			old := s.startAt.Load()
			if old != 0 && old <= c || s.startAt.CompareAndSwap(old, c) {
				return true
			}
		}
	}
	return false
}

// unstick covers what learnStart cannot: the reader waits at the counter
// it learnt, but the sequences from there to the first one the publisher
// wrote after adding the ring are never written, and when they are more
// than the reader's gap scan reaches it would wait until the ring laps. If
// nothing was delivered JoinGrace after the connect, it learns the counter
// again and the reader restarts there; the sequences passed over are
// counted in BeforeJoin.
func (s *Subscriber) unstick(from bus.PeerInfo) {
	defer s.wg.Done()
	select {
	case <-time.After(s.cfg.JoinGrace):
	case <-s.done:
		return
	}
	if s.h.joinedAt.Load() != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes := []bus.PeerInfo{from}
	for _, p := range s.publishers() {
		nodes = append(nodes, p.Node)
	}
	for _, n := range nodes {
		if hc, err := askHome(s, ctx, n); err == nil {
			if s.h.joinedAt.Load() == 0 {
				s.restartAt.Store(hc.Next) // pairs with the Load in maybeStart
				s.log.Info().Uint64("seq", hc.Next).Msg("subscriber: nothing arrived since joining; restarting the ring at the home's counter")
			}
			return
		}
	}
}

// publishers lists the topic's publishers the bus reported (none before
// Subscribe returned).
func (s *Subscriber) publishers() []bus.PublisherInfo {
	s.mu.Lock()
	sub := s.sub
	s.mu.Unlock()
	if sub == nil {
		return nil
	}
	return sub.Publishers()
}

// homeCounter is a home's answer to "what is your counter": Next, the
// next sequence it hands out, and Start, its epoch's first (0 from a home
// that does not say).
type homeCounter struct{ Next, Start uint64 }

// errFencedHome: the home that answered was fenced (a newer epoch took
// the topic); its counter is no sequence.
var errFencedHome = errors.New("subscriber: the home that answered is fenced")

// decodeCounter reads a home's counter reply: the counter, then its
// epoch's start (a home before the start was sent gives the counter
// alone), each 8 bytes little-endian. A counter of 0, or a start above the
// counter, is no home's; a counter at or above ring.FenceAdd is a fenced
// home's (errFencedHome): a ring restarted there never delivers again
// (the CLI's NATS-outage test saw a ring restarted at 4611686018431582209
// by unstick, which took a superseded home's answer, deliver nothing for
// a minute).
func decodeCounter(b []byte) (homeCounter, error) {
	var hc homeCounter
	switch len(b) {
	case 16:
		hc.Start = binary.LittleEndian.Uint64(b[8:])
		fallthrough
	case 8:
		hc.Next = binary.LittleEndian.Uint64(b[:8])
	default:
		return hc, fmt.Errorf("subscriber: home's counter reply of %d bytes, want 16 (or 8)", len(b))
	}
	if hc.Next >= ring.FenceAdd {
		return homeCounter{}, fmt.Errorf("%w: its counter is %d", errFencedHome, hc.Next)
	}
	if hc.Next == 0 || hc.Start > hc.Next {
		return homeCounter{}, fmt.Errorf("subscriber: home's counter reply: counter %d, epoch start %d", hc.Next, hc.Start)
	}
	return hc, nil
}

// askCounter asks the topic's home on node (if it is there) for its
// counter, through the bus's queue-pair exchange over the provider that
// reaches node; the queue pair is closed at once, never used.
func (s *Subscriber) askCounter(ctx context.Context, node bus.PeerInfo) (homeCounter, error) {
	dev, err := s.devs.Get(s.node.ProviderFor(node))
	if err != nil {
		return homeCounter{}, err
	}
	c, err := link.OpenConfined(dev, link.Query) // the home reaches nothing here
	if err != nil {
		return homeCounter{}, err
	}
	defer c.Close()
	rep, err := s.node.Connect(ctx, node.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetHome, Endpoint: c.QP.LocalEndpoint()})
	if err != nil {
		return homeCounter{}, err
	}
	return decodeCounter(rep.Data)
}
