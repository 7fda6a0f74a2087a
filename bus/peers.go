package bus

import (
	"sort"
	"time"
)

type peer struct {
	info     PeerInfo
	lastSeen time.Time
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
// Ageing counts only time this node could listen. A tick late by more
// than an interval and more than a quarter of the timeout means this
// process did not run (a loaded host, a stop signal, a long pause): the
// peers' heartbeats of that time are still unread in its connection, and
// the ticker's pending tick runs before the reader gets to them, so
// counting the stall would drop every peer at once, closing every queue
// pair to it. The stall is added to every peer's lastSeen instead; a peer
// that really died is dropped once it has been silent for HeartbeatTimeout
// of listening time (later by at most the stalls).
func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		stall := now.Sub(prev) - n.cfg.HeartbeatInterval
		prev = now
		if !n.connected.Load() {
			continue
		}
		n.heartbeat()
		n.mu.Lock()
		if stall > max(n.cfg.HeartbeatInterval, n.cfg.HeartbeatTimeout/4) {
			for _, p := range n.peers {
				p.lastSeen = p.lastSeen.Add(stall)
			}
			n.log.Info().Dur("stalled", stall).Int("peers", len(n.peers)).
				Msg("bus: this node did not run for a while; its peers' silence meanwhile is not counted")
		}
		for _, p := range n.peers {
			if now.Sub(p.lastSeen) > n.cfg.HeartbeatTimeout {
				n.peerDownLocked(p, ErrPeerLost)
			}
		}
		n.mu.Unlock()
	}
}
