package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/tickbus/tickbus/stats"

	"github.com/tickbus/tickbus/rdma"
)

// Stats is a node's control-plane counters, as reported by Node.Stats and
// in the micro service's $SRV.STATS and info endpoint.
type Stats struct {
	Node            string            `json:"node"`
	Host            string            `json:"host"`
	Connected       bool              `json:"connected"`
	Reconnects      uint64            `json:"reconnects"`
	Peers           []string          `json:"peers"`
	Publications    int               `json:"publications"`  // open now
	Subscriptions   int               `json:"subscriptions"` // open now
	Homes           []string          `json:"homes"`         // topics whose home is here
	HeartbeatsSent  uint64            `json:"heartbeats_sent"`
	MessagesIn      uint64            `json:"messages_in"`
	AnnouncementsIn uint64            `json:"announcements_in"`
	ConnectsMade    uint64            `json:"connects_made"`
	ConnectsFailed  uint64            `json:"connects_failed"`
	ConnectsServed  uint64            `json:"connects_served"`
	ConnectsRefused uint64            `json:"connects_refused"`
	Ignored         map[string]uint64 `json:"ignored"` // bad messages ignored, per subject kind
	// Rejected counts, per message kind, messages ignored because they
	// failed a security check: unsigned or mis-signed, replayed, a node id
	// signed by another key, or an identity not allowed on the topic. Each
	// is counted in Ignored too.
	Rejected map[string]uint64 `json:"rejected"`
	// WatcherRestarts counts home-bucket watchers started again because
	// they ended, the connection came back, or they fell deaf (watch.go).
	WatcherRestarts uint64 `json:"watcher_restarts"`
	// DiscoveryDropped counts discovery messages the NATS client dropped
	// because this node could not keep up (slow consumer).
	DiscoveryDropped int `json:"discovery_dropped"`
}

type counters struct {
	heartbeatsSent, messagesIn, announcementsIn atomic.Uint64
	connectsMade, connectsFailed                atomic.Uint64
	connectsServed, connectsRefused             atomic.Uint64

	mu       sync.Mutex
	ignored  map[string]uint64
	rejected map[string]uint64
}

func (c *counters) reject(kind string) {
	c.mu.Lock()
	if c.rejected == nil {
		c.rejected = map[string]uint64{}
	}
	c.rejected[kind]++
	c.mu.Unlock()
}

func (c *counters) ignore(kind string) {
	c.mu.Lock()
	if c.ignored == nil {
		c.ignored = map[string]uint64{}
	}
	c.ignored[kind]++
	c.mu.Unlock()
}

// Stats returns the node's counters now.
func (n *Node) Stats() Stats {
	c := &n.counters
	s := Stats{
		Node:            n.self.ID,
		Host:            n.self.HostID,
		Connected:       n.connected.Load(),
		Reconnects:      n.reconnects.Load(),
		HeartbeatsSent:  c.heartbeatsSent.Load(),
		MessagesIn:      c.messagesIn.Load(),
		AnnouncementsIn: c.announcementsIn.Load(),
		ConnectsMade:    c.connectsMade.Load(),
		ConnectsFailed:  c.connectsFailed.Load(),
		ConnectsServed:  c.connectsServed.Load(),
		ConnectsRefused: c.connectsRefused.Load(),
		WatcherRestarts: n.watchRestarts.Load(),
		Ignored:         map[string]uint64{},
		Rejected:        map[string]uint64{},
	}
	if d, err := n.disc.Dropped(); err == nil {
		s.DiscoveryDropped = d
	}
	c.mu.Lock()
	for k, v := range c.ignored {
		s.Ignored[k] = v
	}
	for k, v := range c.rejected {
		s.Rejected[k] = v
	}
	c.mu.Unlock()
	for _, p := range n.Peers() {
		s.Peers = append(s.Peers, p.ID)
	}
	n.mu.Lock()
	for _, m := range n.localPubs {
		s.Publications += len(m)
	}
	for _, m := range n.localSubs {
		s.Subscriptions += len(m)
	}
	for t, h := range n.homes {
		if h.sub != nil {
			s.Homes = append(s.Homes, t)
		}
	}
	n.mu.Unlock()
	return s
}

// StatsSubject is the subject of a subscriber's periodic stats message,
// as stats names it: P.stats.<topic>.<subscriber>.
func (n *Node) StatsSubject(topic, subscriber string) string {
	return stats.Subject(n.cfg.Prefix, topic, subscriber)
}

// PublishStats publishes msg (bytes in stats's format; the bus does
// not read them) on StatsSubject(topic, subscriber).
func (n *Node) PublishStats(topic, subscriber string, msg []byte) error {
	return n.PublishStatsSubject(n.StatsSubject(topic, subscriber), msg)
}

// PublishStatsSubject publishes msg on subject, which must lie under
// P.stats. It has the shape of stats.PublishFunc, so a subscriber can pass
// node.PublishStatsSubject to (*stats.Reporter).Publish.
func (n *Node) PublishStatsSubject(subject string, msg []byte) error {
	base := strings.TrimSuffix(stats.SubjectAll(n.cfg.Prefix), ">")
	rest, ok := strings.CutPrefix(subject, base)
	if !ok || rest == "" || strings.ContainsAny(rest, "*> \t\r\n") {
		return fmt.Errorf("%w: stats subject %q, want one under %s", ErrInvalidConfig, subject, base)
	}
	if n.isClosed() {
		return ErrClosed
	}
	if err := n.nc.Publish(subject, msg); err != nil {
		return fmt.Errorf("bus: publish stats: %w", err)
	}
	return nil
}

// StatsFunc receives one stats message and its subject; decode it with
// stats (the body names topic and subscriber exactly). msg is only
// valid during the call.
type StatsFunc func(subject string, msg []byte)

// SubscribeStats calls f for every stats message of topic ("" for every
// topic), one at a time, until the returned stop function is called or the
// node closes. The server has the subscription when it returns.
func (n *Node) SubscribeStats(topic string, f StatsFunc) (stop func() error, err error) {
	w, err := n.WatchStats(topic, f, 0, 0)
	if err != nil {
		return nil, err
	}
	return w.Stop, nil
}

// StatsWatch is a subscription to stats messages (WatchStats).
type StatsWatch struct {
	n   *Node
	sub *nats.Subscription
}

// WatchStats is SubscribeStats for a reader that must never fall behind in
// silence (a dashboard): messages that arrive while limitMsgs messages or
// limitBytes bytes are already waiting for f are dropped by the client and
// counted in Dropped. Zero limits keep the NATS client's defaults.
func (n *Node) WatchStats(topic string, f StatsFunc, limitMsgs, limitBytes int) (*StatsWatch, error) {
	subj := stats.SubjectAll(n.cfg.Prefix)
	if topic != "" {
		if err := checkTopic("topic", topic); err != nil {
			return nil, err
		}
		subj = strings.TrimSuffix(stats.Subject(n.cfg.Prefix, topic, "x"), "x") + "*"
	}
	if f == nil {
		return nil, fmt.Errorf("%w: WatchStats with nil func", ErrInvalidConfig)
	}
	if limitMsgs < 0 || limitBytes < 0 {
		return nil, fmt.Errorf("%w: WatchStats limits %d messages, %d bytes, want >= 0", ErrInvalidConfig, limitMsgs, limitBytes)
	}
	if n.isClosed() {
		return nil, ErrClosed
	}
	sub, err := n.nc.Subscribe(subj, func(m *nats.Msg) { f(m.Subject, m.Data) })
	if err == nil && (limitMsgs > 0 || limitBytes > 0) {
		m, b := limitMsgs, limitBytes
		if m == 0 {
			m = nats.DefaultSubPendingMsgsLimit
		}
		if b == 0 {
			b = nats.DefaultSubPendingBytesLimit
		}
		err = sub.SetPendingLimits(m, b)
	}
	if err == nil {
		err = n.flush(context.Background()) // the server has the subscription when we return
	}
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return nil, fmt.Errorf("bus: subscribe stats: %w", err)
	}
	return &StatsWatch{n: n, sub: sub}, nil
}

// Dropped is how many messages the client dropped because f fell behind.
func (w *StatsWatch) Dropped() (int, error) { return w.sub.Dropped() }

// Stop ends the subscription. Idempotent; nil after the node closed.
func (w *StatsWatch) Stop() error {
	if err := w.sub.Unsubscribe(); err != nil && !w.n.isClosed() && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("bus: unsubscribe stats: %w", err)
	}
	return nil
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// ProviderFor picks the rdma provider for reaching peer: Config.Provider if
// set; shm when both share a host and can open shm; else the first of this
// node's Providers (other than shm) the peer has too; else tcp.
func (n *Node) ProviderFor(peer PeerInfo) string {
	if n.cfg.Provider != "" {
		return n.cfg.Provider
	}
	has := func(list []string, p string) bool {
		for _, x := range list {
			if x == p {
				return true
			}
		}
		return false
	}
	if peer.HostID == n.self.HostID && has(n.self.Providers, rdma.ProviderShm) && (len(peer.Providers) == 0 || has(peer.Providers, rdma.ProviderShm)) {
		return rdma.ProviderShm
	}
	for _, p := range n.self.Providers {
		if p != rdma.ProviderShm && has(peer.Providers, p) {
			return p
		}
	}
	return rdma.ProviderTCP
}
