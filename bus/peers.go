package bus

import (
	"sort"
	"time"
)

type peer struct {
	info     PeerInfo
	lastSeen time.Time
	// askedAt is when this node, hearing the peer anew, asked it alone
	// to re-announce; answered, whether an announcement of it came since.
	// See whoBack.
	askedAt  time.Time
	answered bool
}

// Peers lists the live peers (not this node), sorted by id.
func (n *Node) Peers() []PeerInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]PeerInfo, 0, len(n.peers))
	for _, p := range n.peers {
		out = append(out, p.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (n *Node) heartbeat() {
	n.counters.heartbeatsSent.Add(1)
	n.publish(n.subject("d", kindHeartbeat), &wireMsg{Kind: kindHeartbeat})
}

// heartbeatLoop sends heartbeats and ages out silent peers. While the
// connection is down nobody can hear anybody, so ageing pauses; after a
// reconnect every peer gets a fresh timeout.
//
// Ageing counts only time this node could listen, and two things keep it
// from listening while its peers go on sending:
//
//   - the process did not run (a loaded host, a stop signal, a long
//     pause): a tick late by more than an interval and more than a
//     quarter of the timeout. The peers' heartbeats of that time are
//     still unread in its connection, and the ticker's pending tick runs
//     before the reader gets to them, so counting the stall would drop
//     every peer at once, closing every queue pair to it. The stall is
//     added to every peer's lastSeen instead.
//   - it runs but reads discovery messages slower than they come (a
//     starved host; under the race detector every signature check is
//     about 20 times slower): messages that had come by the previous tick
//     are still unread at this one. Whatever a peer sent meanwhile may be
//     among them, so this interval is not counted either. (It used to be:
//     a node a few seconds behind dropped live peers whose heartbeats
//     waited in its queue, then re-added them, and their queue pairs went
//     and came with them.)
//
// A peer that really died is dropped once it has been silent for
// HeartbeatTimeout of listening time (later by at most the stalls and the
// intervals this node was behind).
func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	prev := time.Now()
	arrived := n.discArrived()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		elapsed := now.Sub(prev)
		stall := elapsed - n.cfg.HeartbeatInterval
		prev = now
		// behind: more than one message that had come by the last tick is
		// unread (one may be counted twice: see discArrived)
		done := n.discDone.Load() // pairs with the Add in onDiscovery
		behind := done+1 < arrived
		arrived = n.discArrived()
		if !n.connected.Load() {
			continue
		}
		n.heartbeat()
		var unheard time.Duration // of the time since the last tick
		if stall > max(n.cfg.HeartbeatInterval, n.cfg.HeartbeatTimeout/4) {
			unheard = stall
			n.log.Info().Dur("stalled", stall).Int("peers", n.peerCount()).
				Msg("bus: this node did not run for a while; its peers' silence meanwhile is not counted")
		}
		if behind {
			unheard = elapsed
			if ok, held := n.limiter.allow("discovery-behind", now); ok {
				n.log.Info().Uint64("unread", arrived-done).Int("suppressed", held).
					Msg("bus: this node is behind on discovery messages; its peers' silence meanwhile is not counted")
			}
		}
		n.mu.Lock()
		for _, p := range n.peers {
			// of the unheard time, only what passed since p was last heard
			p.lastSeen = p.lastSeen.Add(max(0, min(unheard, now.Sub(p.lastSeen))))
			if now.Sub(p.lastSeen) > n.cfg.HeartbeatTimeout {
				n.peerDownLocked(p, ErrPeerLost)
			}
		}
		n.mu.Unlock()
	}
}

// discArrived is how many discovery messages have reached this node's
// client: those handled and those waiting. nats.go counts the one being
// handled as pending until just after its handler returns, so one that
// has just been handled may be counted twice.
func (n *Node) discArrived() uint64 {
	pending, _, err := n.disc.Pending()
	if err != nil || pending < 0 {
		pending = 0
	}
	return n.discDone.Load() + uint64(pending)
}

func (n *Node) peerCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.peers)
}
