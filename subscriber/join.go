package subscriber

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
)

// recHandler records each tick's latency, then calls the user's handler.
//
// Joining. A ring is written to by each publisher only from the moment that
// publisher added it; sequences claimed before are never written into it,
// and the reader reports them as gaps or overruns. Before the ring's first
// tick those are counted apart (Counters.BeforeJoin, logged) and not passed
// to the handler: the subscriber's stream starts at its first tick. After
// it, whenever a publisher is announced that has not delivered a tick yet,
// until it has or until JoinGrace after the last publisher connected, a
// gap or overrun is handed to the handler as ring.EventJoin (counted in
// Counters.Join): never hidden, but told apart from a loss of a running
// stream. Outside those windows every loss is a gap or overrun.
type recHandler struct {
	user   Handler
	rec    *stats.Recorder
	joined bool // polling goroutine only

	joining      atomic.Bool  // a known publisher has not delivered yet
	joinDeadline atomic.Int64 // unix ns after which joining no longer excuses losses
	joinMu       sync.Mutex   // pending and seen; taken only while joining
	pending      map[uint32]struct{}
	seen         map[uint32]struct{}

	joinedAt    atomic.Uint64 // first delivered sequence; written once by the poller
	startedAt   atomic.Uint64 // the reader was moved here by StartAt (0: not moved)
	joinGap     atomic.Uint64 // gap sequences lost while joining
	joinOverrun atomic.Uint64 // overrun sequences lost while joining
	joinSkipped atomic.Uint64 // sequences a restart (unstick) passed over; the ring never saw them
	joinEpoch   atomic.Uint64 // epoch sequences passed before the first tick
	lateGap     atomic.Uint64 // gap sequences handed out as EventJoin
	lateOverrun atomic.Uint64 // overrun sequences handed out as EventJoin

	clock wallClock // the poll goroutine's
	lat   latencies // the poll goroutine's: latencies not yet recorded
}

func (h *recHandler) OnTicks(ts []ring.Tick) {
	h.lat.add(h.rec, h.clock.now(), ts) // the one timestamp per batch; recorded when idle
	if !h.joined {
		h.joined = true
		h.joinedAt.Store(ts[0].Seq) // pairs with the Load in Counters
	}
	if h.joining.Load() { // pairs with the Store in publisherUp
		h.delivered(ts)
	}
	if h.user != nil {
		h.user.OnTicks(ts)
	}
}

// delivered marks the publishers of ts as joined (join window only).
func (h *recHandler) delivered(ts []ring.Tick) {
	h.joinMu.Lock()
	for i := range ts {
		id := ts[i].Publisher
		if _, ok := h.pending[id]; ok {
			delete(h.pending, id)
		}
		h.seen[id] = struct{}{}
	}
	if len(h.pending) == 0 {
		h.joining.Store(false)
	}
	h.joinMu.Unlock()
}

// publisherUp notes a publisher that has not delivered yet.
func (h *recHandler) publisherUp(id uint32, grace time.Duration) {
	h.joinMu.Lock()
	if _, ok := h.seen[id]; !ok {
		h.pending[id] = struct{}{}
		h.joining.Store(true)
	}
	h.joinMu.Unlock()
	h.extend(grace)
}

// extend keeps the join window open for grace from now.
func (h *recHandler) extend(grace time.Duration) {
	h.joinDeadline.Store(time.Now().Add(grace).UnixNano())
}

func (h *recHandler) OnEvent(ev ring.Event) {
	switch ev.Kind {
	case ring.EventGap, ring.EventOverrun:
		if !h.joined {
			if ev.Kind == ring.EventGap {
				h.joinGap.Add(ev.Count())
			} else {
				h.joinOverrun.Add(ev.Count())
			}
			return
		}
		if h.joining.Load() && time.Now().UnixNano() < h.joinDeadline.Load() {
			if ev.Kind == ring.EventGap {
				h.lateGap.Add(ev.Count())
			} else {
				h.lateOverrun.Add(ev.Count())
			}
			ev.Kind = ring.EventJoin
		}
	case ring.EventEpoch:
		if !h.joined {
			h.joinEpoch.Add(ev.Count())
			return
		}
	}
	if h.user != nil {
		h.user.OnEvent(ev)
	}
}
