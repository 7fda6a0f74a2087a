package bus

import (
	"errors"
	"fmt"
	"time"
)

// Unheard peers: the one rule for a peer the bus can no longer hear.
//
// A peer dropped by heartbeat (ErrPeerLost) is one this node cannot hear
// on NATS, not necessarily a dead one: its server may have died, or its
// reconnect be slow on a loaded host, while the queue pairs to it work.
// So a subscriber of a local publication (or a publisher of a local
// subscription) lost that way is not reported gone while the owner's
// liveness check (PublishSpec.SubscriberReachable,
// SubscribeSpec.PublisherReachable) says its data plane is up: it is held
// (OnSubscriberUnheard / OnPublisherUnheard) until
//
//   - its node is heard again and re-announces it unchanged (same
//     incarnation, same ring or data): held no longer, and never gone
//     (OnSubscriberHeard / OnPublisherHeard; no second OnSubscriber);
//   - the check says it is down (looked at every unheardCheck): gone,
//     with a reason wrapping ErrPeerLost and ErrHoldFailed;
//   - Config.UnheardHold passes: gone, wrapping ErrPeerLost and
//     ErrHoldEnded;
//   - its node says goodbye (ErrPeerLeft), comes back as another
//     incarnation (ErrPeerRestarted), it withdraws (ErrWithdrawn) or its
//     node re-announces it changed (ErrWithdrawn, then reported anew):
//     gone at once with that reason.
//
// A negative Config.UnheardHold, or no liveness check, reports a lost peer
// gone at once, as any other. Every decision runs on the owner's event
// queue, in order with its other callbacks, so a check and a re-announce
// never race, and a held end is reported gone exactly once.

// unheardCheck is how often a held peer's liveness is looked at.
const unheardCheck = 50 * time.Millisecond

// peerEnd is a subscriber or a publisher as the bus reports it.
type peerEnd interface {
	SubscriberInfo | PublisherInfo
	Key() string
	peer() PeerInfo
}

func (s SubscriberInfo) peer() PeerInfo { return s.Node }
func (p PublisherInfo) peer() PeerInfo  { return p.Node }

// holds are one publication's held subscribers, or one subscription's held
// publishers. Used only on the owner's event queue (q), never locked.
type holds[T peerEnd] struct {
	q     *eventQueue
	hold  time.Duration // Config.UnheardHold; <= 0: never hold
	same  func(a, b T) bool
	up    func(T) bool           // the owner's liveness check; nil: never hold
	onOn  func(T, time.Duration) // held (with the hold); optional
	onOff func(T, time.Duration) // heard again (after how long); optional
	gone  func(T, error)         // report gone
	held  map[string]*heldEnd[T] // by Key
}

type heldEnd[T peerEnd] struct {
	info  T
	since time.Time
	over  chan struct{} // closed when no longer held: ends its ticker
}

func newHolds[T peerEnd](q *eventQueue, hold time.Duration, same func(a, b T) bool, up func(T) bool,
	onOn, onOff func(T, time.Duration), gone func(T, error)) *holds[T] {
	return &holds[T]{q: q, hold: hold, same: same, up: up, onOn: onOn, onOff: onOff, gone: gone,
		held: map[string]*heldEnd[T]{}}
}

// down is told that x is gone for reason (on the queue). It reports
// whether x is held instead; if not, the caller reports it gone.
func (h *holds[T]) down(x T, reason error) bool {
	if !errors.Is(reason, ErrPeerLost) || h.hold <= 0 || h.up == nil || !h.up(x) {
		return false
	}
	if _, ok := h.held[x.Key()]; ok { // (the bus reports each end once; a second loss changes nothing)
		return true
	}
	e := &heldEnd[T]{info: x, since: time.Now(), over: make(chan struct{})}
	h.held[x.Key()] = e
	if h.onOn != nil {
		h.onOn(x, h.hold)
	}
	go h.watch(x.Key(), e)
	return true
}

// watch queues a check of e every unheardCheck until e is no longer held
// or the queue closes. One check at most waits in the queue.
func (h *holds[T]) watch(key string, e *heldEnd[T]) {
	t := time.NewTicker(unheardCheck)
	defer t.Stop()
	queued := make(chan struct{}, 1)
	for {
		select {
		case <-e.over:
			return
		case <-h.q.done:
			return
		case <-t.C:
		}
		select {
		case queued <- struct{}{}:
			h.q.push(func() {
				<-queued
				h.check(key, e)
			})
		default: // the last check still waits
		}
	}
}

// check ends e's hold if its data plane is down or the hold has passed.
func (h *holds[T]) check(key string, e *heldEnd[T]) {
	if h.held[key] != e {
		return
	}
	var why error
	switch {
	case !h.up(e.info):
		why = ErrHoldFailed
	case time.Now().Sub(e.since) >= h.hold:
		why = ErrHoldEnded
	default:
		return
	}
	h.release(key, e)
	h.gone(e.info, fmt.Errorf("%w (unheard for %v): %w", ErrPeerLost, time.Now().Sub(e.since).Round(time.Millisecond), why))
}

func (h *holds[T]) release(key string, e *heldEnd[T]) {
	delete(h.held, key)
	close(e.over)
}

// heard is told that x is announced (on the queue). It reports whether x
// was held and is the same: heard again, nothing to report but that. A
// held one announced changed is reported gone first (the caller then
// reports x as new).
func (h *holds[T]) heard(x T) bool {
	e, ok := h.held[x.Key()]
	if !ok {
		return false
	}
	h.release(x.Key(), e)
	if !h.same(e.info, x) {
		reason := ErrWithdrawn
		if e.info.peer().Incarnation != x.peer().Incarnation {
			reason = ErrPeerRestarted
		}
		h.gone(e.info, reason)
		return false
	}
	if h.onOff != nil {
		h.onOff(x, time.Now().Sub(e.since))
	}
	return true
}

// ended: the held end key withdrew (withdrawn), or, with key "", node
// said goodbye or restarted (nodeGone). On the queue.
func (h *holds[T]) ended(key, node string, inc uint64, reason error) {
	if key != "" {
		h.withdrawn(key, reason)
	} else {
		h.nodeGone(node, inc, reason)
	}
}

// withdrawn: the held end key withdrew (its withdrawal came after its
// node was heard again): gone at once.
func (h *holds[T]) withdrawn(key string, reason error) {
	if e, ok := h.held[key]; ok {
		h.release(key, e)
		h.gone(e.info, reason)
	}
}

// nodeGone: node said goodbye (keepInc 0), or was heard as incarnation
// keepInc: its held ends of another incarnation are gone, with reason.
func (h *holds[T]) nodeGone(node string, keepInc uint64, reason error) {
	for key, e := range h.held {
		p := e.info.peer()
		if p.ID == node && (keepInc == 0 || p.Incarnation != keepInc) {
			h.release(key, e)
			h.gone(e.info, reason)
		}
	}
}
