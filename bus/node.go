package bus

import (
	"context"
	"fmt"
	"os"
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

	srv    *server.Server // embedded server; nil with URLs
	srvDir string         // its JetStream store, removed at Close
	token  string         // the embedded server's token
	nc     *nats.Conn
	svc    micro.Service
	disc   *nats.Subscription // P.d.>: every discovery message, in order
	// discDone counts discovery messages handled: with disc's pending
	// count, heartbeatLoop tells whether this node keeps up (peers.go).
	discDone atomic.Uint64
	events   *eventQueue // Config.OnPeerDown
	limiter  *rateLog
	id       identity      // this node's key: signs every message
	trust    *trust        // other nodes' keys, bindings and replay state
	sendSeq  atomic.Uint64 // sequence of the last message sealed

	ctx    context.Context // ends at Close; bounds accept handlers
	cancel context.CancelFunc
	wg     sync.WaitGroup

	connected  atomic.Bool
	reconnects atomic.Uint64
	// byeMu orders every message this node publishes before its goodbye
	// (close takes it to send the goodbye and set byeSent; publish reads
	// it): a heartbeat or an answer racing Close would otherwise reach
	// the peers after the goodbye and bring this node back among them
	// until their heartbeat timeout.
	byeMu   sync.RWMutex
	byeSent bool
	// afterBye runs in close right after the goodbye (a test's hook: a
	// heartbeat racing Close).
	afterBye func()
	// reread asks refreshRecords to read the home records now (a
	// reconnect: the watchers may have lost their consumers).
	reread   chan struct{}
	counters counters

	kvMu   sync.Mutex // creating the buckets
	leases jetstream.KeyValue
	seqs   jetstream.KeyValue
	// watches are the leases' and the records' watchers (watch.go);
	// made at Open, filled in by kv.
	watches       [2]*bucketWatch
	watchRestarts atomic.Uint64
	// backstop: refreshRecords reads every topic's record at least this
	// often (recordBackstop; tests of the watchers turn it off).
	backstop time.Duration
	// probeEvery: how often probeWatchers looks (watchProbe; tests of
	// the probe make it shorter).
	probeEvery time.Duration

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
		cfg:        cfg,
		reread:     make(chan struct{}, 1),
		watches:    [2]*bucketWatch{newBucketWatch(), newBucketWatch()},
		backstop:   recordBackstop,
		probeEvery: watchProbe,
		log:        cfg.Logger.With().Str("node", cfg.NodeID).Logger(),
		self:       PeerInfo{ID: cfg.NodeID, HostID: cfg.HostID, Incarnation: uint64(time.Now().UnixNano()), Providers: cfg.Providers, Key: id.pub},
		limiter:    newRateLog(cfg.LogEvery),
		id:         id,
		trust:      newTrust(cfg.MaxClockSkew, cfg.NodeID, id.pub),
		peers:      map[string]*peer{},
		subs:       map[string]map[string]SubscriberInfo{},
		pubs:       map[string]map[string]PublisherInfo{},
		localPubs:  map[string]map[string]*Publication{},
		localSubs:  map[string]map[string]*Subscription{},
		homes:      map[string]*homeSlot{},
		records:    map[string]homeRecord{},
		wakes:      map[string]chan struct{}{},
		pending:    map[string]bool{},
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
		if n.srv, n.srvDir, err = startEmbedded(cfg.NATS.EmbeddedListen, "tickbus-"+cfg.NodeID, n.token, cfg.NATS); err != nil {
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
	n.sendWho("", "")
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

// UnheardHold is how long a subscriber or publisher whose node this bus
// lost by heartbeat is held while its data plane is up (Config.UnheardHold
// with its default applied; negative: not at all).
func (n *Node) UnheardHold() time.Duration { return n.cfg.UnheardHold }

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

func (n *Node) checkOpen() error {
	if n.closed {
		return ErrClosed
	}
	return nil
}
