package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// Node is one tickbus process's presence on the bus: its NATS connection
// (and embedded server, if any), its peer table, its announcements and the
// micro service that lists it. Methods are safe for concurrent use.
type Node struct {
	cfg  Config
	log  zerolog.Logger
	self PeerInfo

	srv     *server.Server // embedded server; nil with URLs
	srvDir  string         // its JetStream store, removed at Close
	token   string         // the embedded server's token
	nc      *nats.Conn
	svc     micro.Service
	disc    *nats.Subscription // P.d.>: every discovery message, in order
	events  *eventQueue        // Config.OnPeerDown
	limiter *rateLog
	id      identity      // this node's key: signs every message
	trust   *trust        // other nodes' keys, bindings and replay state
	sendSeq atomic.Uint64 // sequence of the last message sealed

	ctx    context.Context // ends at Close; bounds accept handlers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connected  atomic.Bool
	reconnects atomic.Uint64
	counters   counters

	kvMu   sync.Mutex // creating the buckets
	leases jetstream.KeyValue
	seqs   jetstream.KeyValue

	mu        sync.Mutex
	closed    bool
	peers     map[string]*peer
	subs      map[string]map[string]SubscriberInfo // topic → key → every known subscriber
	pubs      map[string]map[string]PublisherInfo  // topic → key → every known publisher
	localPubs map[string]map[string]*Publication   // topic → publisher id
	localSubs map[string]map[string]*Subscription  // topic → subscriber id
	homes     map[string]*homeSlot                 // topics whose home is here
	records   map[string]homeRecord                // topic → the newest home record seen (onRecord)
	wakes     map[string]chan struct{}             // topic → closed at its next lease or record change
	pending   map[string]bool                      // "topic/id" of Publish calls resolving their home
	closeOnce sync.Once
	closeErr  error // set once by close
}

type peer struct {
	info     PeerInfo
	lastSeen time.Time
}

// Open starts a node: the embedded server (without URLs), the NATS
// connection, the discovery subscription, the micro service, and the
// heartbeat loop; then it asks who is there. ctx bounds start-up only.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	id, err := loadIdentity(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       cfg,
		log:       cfg.Logger.With().Str("node", cfg.NodeID).Logger(),
		self:      PeerInfo{ID: cfg.NodeID, HostID: cfg.HostID, Incarnation: uint64(time.Now().UnixNano()), Providers: cfg.Providers, Key: id.pub},
		limiter:   newRateLog(cfg.LogEvery),
		id:        id,
		trust:     newTrust(cfg.MaxClockSkew, cfg.NodeID, id.pub),
		peers:     map[string]*peer{},
		subs:      map[string]map[string]SubscriberInfo{},
		pubs:      map[string]map[string]PublisherInfo{},
		localPubs: map[string]map[string]*Publication{},
		localSubs: map[string]map[string]*Subscription{},
		homes:     map[string]*homeSlot{},
		records:   map[string]homeRecord{},
		wakes:     map[string]chan struct{}{},
		pending:   map[string]bool{},
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.events = newEventQueue() // before the first discovery message can drop a peer
	fail := func(err error) (*Node, error) {
		n.cancel()
		n.events.close()
		if n.nc != nil {
			n.nc.Close()
		}
		if n.srv != nil {
			n.srv.Shutdown()
			_ = os.RemoveAll(n.srvDir)
		}
		return nil, err
	}
	if len(cfg.NATS.URLs) == 0 {
		if n.token, err = embeddedToken(); err != nil {
			return fail(fmt.Errorf("%w: embedded server secret: %w", ErrConnect, err))
		}
		if n.srv, n.srvDir, err = startEmbedded(cfg.NATS.EmbeddedListen, "tickbus-"+cfg.NodeID, n.token); err != nil {
			return fail(err)
		}
	}
	if n.nc, err = n.dialWait(ctx); err != nil {
		return fail(err)
	}
	n.connected.Store(true)
	if n.disc, err = n.nc.Subscribe(n.subject("d", ">"), n.onDiscovery); err != nil {
		return fail(fmt.Errorf("%w: subscribe discovery: %v", ErrConnect, err))
	}
	_ = n.disc.SetPendingLimits(64*1024, 256<<20)
	if n.svc, err = n.addService(); err != nil {
		return fail(err)
	}
	if err := n.flush(ctx); err != nil {
		return fail(fmt.Errorf("%w: flush: %v", ErrConnect, err))
	}
	n.wg.Add(1)
	go n.heartbeatLoop()
	n.heartbeat()
	n.sendWho("")
	n.log.Info().Str("url", n.nc.ConnectedUrlRedacted()).Str("host", n.self.HostID).Msg("bus: node up")
	return n, nil
}

// ID is the node id.
func (n *Node) ID() string { return n.self.ID }

// HostID is the host id.
func (n *Node) HostID() string { return n.self.HostID }

// Info is this node as peers see it.
func (n *Node) Info() PeerInfo { return n.self }

// Prefix is the subject prefix.
func (n *Node) Prefix() string { return n.cfg.Prefix }

// ClientURL is the URL of the embedded server, with its token
// (nats://<token>@127.0.0.1:port: other nodes and NATS tools connect with
// it, so hand it over as a secret), or the URL of the server this node is
// connected to. ServerURL is the same without the token.
func (n *Node) ClientURL() string {
	if n.srv != nil {
		return strings.Replace(n.srv.ClientURL(), "nats://", "nats://"+n.token+"@", 1)
	}
	return n.nc.ConnectedUrl()
}

// ServerURL is ClientURL without credentials, fit for logs.
func (n *Node) ServerURL() string {
	if n.srv != nil {
		return n.srv.ClientURL()
	}
	return n.nc.ConnectedUrlRedacted()
}

// Connected reports whether the NATS connection is up now.
func (n *Node) Connected() bool { return n.connected.Load() }

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

// Close withdraws every publication and subscription, says goodbye (peers
// drop this node at once), stops the micro service, closes the connection
// and stops the embedded server. Idempotent; concurrent calls wait for the
// first.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	n.mu.Lock()
	n.closed = true // from now on Publish, Subscribe and connects to us fail
	var pubs []*Publication
	var subs []*Subscription
	for _, m := range n.localPubs {
		for _, p := range m {
			pubs = append(pubs, p)
		}
	}
	for _, m := range n.localSubs {
		for _, s := range m {
			subs = append(subs, s)
		}
	}
	n.mu.Unlock()
	var errs []error
	for _, p := range pubs {
		errs = append(errs, p.Close())
	}
	for _, s := range subs {
		errs = append(errs, s.Close())
	}
	n.publish(n.subject("d", kindBye), &wireMsg{Kind: kindBye})
	n.cancel()
	if err := n.svc.Stop(); err != nil && n.connected.Load() {
		errs = append(errs, fmt.Errorf("bus: stop micro service: %w", err))
	}
	if err := n.nc.FlushTimeout(n.cfg.RequestTimeout); err != nil && n.connected.Load() {
		errs = append(errs, fmt.Errorf("bus: flush goodbye: %w", err))
	}
	n.nc.Close()
	n.connected.Store(false)
	n.wg.Wait()
	n.events.close()
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		if err := os.RemoveAll(n.srvDir); err != nil {
			errs = append(errs, fmt.Errorf("bus: remove the embedded JetStream store: %w", err))
		}
	}
	n.log.Info().Msg("bus: node closed")
	return errors.Join(errs...)
}

// subject joins the prefix and tokens with dots.
func (n *Node) subject(tokens ...string) string {
	s := n.cfg.Prefix
	for _, t := range tokens {
		s += "." + t
	}
	return s
}

// publish stamps w with this node and publishes it; errors are logged (the
// connection buffers while reconnecting).
func (n *Node) publish(subj string, w *wireMsg) {
	b, err := n.seal(subj, w)
	if err == nil {
		err = n.nc.Publish(subj, b)
	}
	if err != nil {
		if ok, held := n.limiter.allow("publish/"+w.Kind, time.Now()); ok {
			n.log.Warn().Err(err).Str("subject", subj).Int("suppressed", held).Msg("bus: publish failed")
		}
	}
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

// badInput counts and logs (rate-limited per subject kind and class, and
// per peer for a security refusal) a message that was ignored.
func (n *Node) badInput(kind string, err error) {
	n.counters.ignore(kind)
	class := errClass(err)
	key, peer := kind+"/"+class, ""
	if r := (*refusal)(nil); errors.As(err, &r) {
		n.counters.reject(kind)
		key, peer = key+"/"+r.peer, r.peer
	}
	if ok, held := n.limiter.allow(key, time.Now()); ok {
		n.log.Warn().Str("kind", kind).Str("class", class).Str("peer", peer).Int("suppressed", held).
			Err(err).Msg("bus: ignored bad message")
	}
}

func (n *Node) checkOpen() error {
	if n.closed {
		return ErrClosed
	}
	return nil
}

// flush waits until the server has processed what was sent, bounded by ctx
// and RequestTimeout.
func (n *Node) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	return n.nc.FlushWithContext(ctx)
}
