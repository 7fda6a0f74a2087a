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
func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if !n.connected.Load() {
			continue
		}
		n.heartbeat()
		now := time.Now()
		n.mu.Lock()
		for _, p := range n.peers {
			if now.Sub(p.lastSeen) > n.cfg.HeartbeatTimeout {
				n.peerDownLocked(p, ErrPeerLost)
			}
		}
		n.mu.Unlock()
	}
}
