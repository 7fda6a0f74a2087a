package bus

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DiscoveryStateForTest describes what n knows for topic, for a failing
// test's message: the discovery messages still waiting in its subscription,
// each peer with how long ago it was last heard, and the topic's
// subscribers it knows of.
func DiscoveryStateForTest(n *Node, topic string) string {
	msgs, bytes, _ := n.disc.Pending()
	now := time.Now()
	n.mu.Lock()
	var peers, subs []string
	for id, p := range n.peers {
		peers = append(peers, fmt.Sprintf("%s@%v", id, now.Sub(p.lastSeen).Round(time.Millisecond)))
	}
	for key := range n.subs[topic] {
		subs = append(subs, key)
	}
	n.mu.Unlock()
	slices.Sort(peers)
	slices.Sort(subs)
	return fmt.Sprintf("%s: %d discovery messages (%d bytes) unread, %d read; peers last heard [%s]; subscribers of %q known [%s]",
		n.self.ID, msgs, bytes, n.counters.messagesIn.Load(), strings.Join(peers, " "), topic, strings.Join(subs, " "))
}

// DiscoveryBehindForTest reports whether n has not yet read every
// discovery message that had reached it at the previous call with the same
// mark (heartbeatLoop's test of keeping up), and moves mark on.
func DiscoveryBehindForTest(n *Node, mark *uint64) bool {
	behind := n.discDone.Load()+1 < *mark
	*mark = n.discArrived()
	return behind
}
