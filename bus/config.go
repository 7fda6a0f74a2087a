package bus

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// DefaultPrefix is the subject prefix when Config.Prefix is empty.
const DefaultPrefix = "tickbus"

// Defaults for the timing knobs of Config.
const (
	DefaultHeartbeatInterval = 500 * time.Millisecond
	DefaultHeartbeatTimeout  = 2 * time.Second
	DefaultRequestTimeout    = 2 * time.Second
	DefaultLeaseTTL          = 750 * time.Millisecond
	DefaultReserveChunk      = 1 << 22
	DefaultLogEvery          = time.Minute
	DefaultReconnectWait     = 100 * time.Millisecond
	DefaultReconnectMax      = 5 * time.Second
	DefaultMaxClockSkew      = time.Minute
	// DefaultUnheardHold is Config.UnheardHold when it is 0: long beside
	// the default heartbeat timeout and a NATS client's reconnect
	// (seconds), short beside a trading day.
	DefaultUnheardHold = 30 * time.Second
)

// Config configures a Node. The zero value (plus nothing) runs an embedded
// NATS server on loopback with a random port and a random node id.
type Config struct {
	// NodeID names the node on the bus; unique per bus. Letters, digits,
	// '-', '_' and ':' only, at most 128 bytes. Default: host id and a random
	// suffix.
	NodeID string
	// HostID names the host; nodes with the same HostID reach each other
	// through shared memory. Default: os.Hostname.
	HostID string
	// Prefix of every subject this node uses. Default DefaultPrefix.
	Prefix string
	// NATS says which server to use; empty URLs run an embedded server.
	NATS NATSConfig
	// Providers this node can open, in order of preference. Default
	// [shm, tcp].
	Providers []string
	// Provider forces one provider for every peer ("" picks per peer: shm on
	// the same host, else the first provider both ends have other than shm).
	Provider string
	// Homes names, per topic, the node that must be the topic's home. A
	// topic not named here gets the first publisher that claims it.
	Homes map[string]string
	// HeartbeatInterval between heartbeats (default 500 ms), and
	// HeartbeatTimeout after which a silent peer is dropped (default 2 s;
	// at least twice the interval). Every heartbeat is signed by its sender
	// and checked by every other node (ed25519, about 60 µs each on a
	// small VM): on a host whose cores all run hot threads that work
	// displaces one of them, so the interval is no shorter than the
	// timeout needs (four heartbeats in it).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// UnheardHold is how long a subscriber or publisher whose node the bus
	// lost by heartbeat (ErrPeerLost) is held while its owner says its data
	// plane is up (PublishSpec.SubscriberReachable,
	// SubscribeSpec.PublisherReachable): a node away from NATS (its
	// server died, its reconnect is slow) is not a dead one. Default
	// DefaultUnheardHold; negative: a lost peer is gone at once; a positive
	// hold is at least 50ms (how often a held peer is looked at). See
	// unheard.go.
	UnheardHold time.Duration
	// RequestTimeout bounds one request (home lookup, connect); default 2 s.
	RequestTimeout time.Duration
	// LeaseTTL is how long a topic's home holds its lease in JetStream
	// without renewing (default 750 ms; at least 100 ms). The home renews
	// every LeaseTTL/4 and stops granting claims when it has not renewed for
	// 3/4 of it; a dead home's successor is elected once it expires. The
	// default keeps a crashed home's failover under a second (p50; see the
	// README) and rides out stalls of the lease loop up to about 560 ms.
	LeaseTTL time.Duration
	// ReserveChunk is how many sequences a home reserves in JetStream at a
	// time before it hands them out (default 4Mi); it extends the
	// reservation when less than half a chunk is left.
	ReserveChunk uint64
	// LogEvery is the shortest time between two log lines about bad input
	// of the same kind on the same subject (default one minute).
	LogEvery time.Duration
	// OnPeerDown, if set, is called once for each peer that said goodbye,
	// timed out or restarted, from the node's event goroutine.
	OnPeerDown func(peer PeerInfo, reason error)
	// Logger for control paths; default zerolog.Nop().
	Logger *zerolog.Logger
	// Key is the node's identity: a user nkey that signs every message.
	// Default: the seed in NATS.NKeySeedFile or NATS.CredsFile (the NATS
	// user's own key), else a key generated for this process.
	Key nkeys.KeyPair
	// Authorization says which identities may publish and subscribe on
	// which topics; the zero value allows every identity that signs.
	Authorization Authorization
	// MaxClockSkew is how far a message's send time may be from this
	// node's clock (default 1 minute); older messages are replays.
	MaxClockSkew time.Duration

	nodeIDGiven bool // NodeID was set, not generated
}

// NATSConfig says how to reach NATS.
type NATSConfig struct {
	// URLs of an external server or cluster ("nats://a:4222,nats://b:4222"
	// or one per entry). Empty runs an embedded server.
	URLs []string
	// EmbeddedListen is the embedded server's host:port (default
	// "127.0.0.1:0", a random loopback port).
	EmbeddedListen string
	// User and Password, or Token, or NKeySeedFile, or CredsFile
	// authenticate to an external server.
	User, Password string
	Token          string
	NKeySeedFile   string
	CredsFile      string
	// TLS: CAFile verifies the server; CertFile and KeyFile authenticate the
	// client. Setting any of them requires TLS.
	CAFile, CertFile, KeyFile string
	// EmbeddedCertFile and EmbeddedKeyFile make the embedded server speak
	// TLS only, with this certificate; CAFile (required with them) is what
	// this node verifies it by. With CertFile and KeyFile set too, the
	// embedded server requires every client to present a certificate that
	// CAFile verifies (mutual TLS).
	EmbeddedCertFile, EmbeddedKeyFile string
	// ReconnectWait is the first reconnect delay; it doubles up to
	// ReconnectMax, with jitter. Reconnects never stop.
	ReconnectWait time.Duration
	ReconnectMax  time.Duration
	// WaitForServer makes Open retry the first connection (with the same
	// backoff) until its context ends, so a node may start before its
	// external server. Without it an unreachable server fails Open at once
	// with ErrConnect. Bad credentials fail at once either way.
	WaitForServer bool
}

// withDefaults fills defaults and checks c.
func (c Config) withDefaults() (Config, error) {
	if c.HostID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		c.HostID = h
	}
	if len(c.HostID) > 255 {
		return c, fmt.Errorf("%w: HostID of %d bytes, want at most 255", ErrInvalidConfig, len(c.HostID))
	}
	c.nodeIDGiven = c.NodeID != ""
	if c.NodeID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.NodeID = sanitizeToken(c.HostID) + "-" + hex.EncodeToString(b[:])
		if len(c.NodeID) > maxTokenLen {
			c.NodeID = c.NodeID[len(c.NodeID)-maxTokenLen:]
		}
	}
	if err := checkToken("NodeID", c.NodeID); err != nil {
		return c, err
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	for _, part := range strings.Split(c.Prefix, ".") {
		if err := checkToken("Prefix", part); err != nil {
			return c, fmt.Errorf("%w (Prefix %q: dot-separated tokens)", err, c.Prefix)
		}
	}
	if len(c.Providers) == 0 {
		c.Providers = []string{rdma.ProviderShm, rdma.ProviderTCP}
	}
	if len(c.Providers) > maxProviders {
		return c, fmt.Errorf("%w: %d Providers, want at most %d", ErrInvalidConfig, len(c.Providers), maxProviders)
	}
	for _, p := range c.Providers {
		if !knownProvider(p) {
			return c, fmt.Errorf("%w: Providers entry %q, want shm, tcp or verbs", ErrInvalidConfig, p)
		}
	}
	if c.Provider != "" && !knownProvider(c.Provider) {
		return c, fmt.Errorf("%w: Provider %q, want \"\", shm, tcp or verbs", ErrInvalidConfig, c.Provider)
	}
	for topic, node := range c.Homes {
		if err := checkTopic("Homes topic", topic); err != nil {
			return c, err
		}
		if err := checkToken("Homes["+topic+"]", node); err != nil {
			return c, err
		}
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = max(DefaultHeartbeatTimeout, 2*c.HeartbeatInterval)
	}
	if c.HeartbeatInterval < time.Millisecond {
		return c, fmt.Errorf("%w: HeartbeatInterval %v, want at least 1ms", ErrInvalidConfig, c.HeartbeatInterval)
	}
	if c.HeartbeatTimeout < 2*c.HeartbeatInterval {
		return c, fmt.Errorf("%w: HeartbeatTimeout %v, want at least twice HeartbeatInterval (%v)",
			ErrInvalidConfig, c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	if c.UnheardHold == 0 {
		c.UnheardHold = DefaultUnheardHold
	}
	if c.UnheardHold > 0 && c.UnheardHold < unheardCheck {
		return c, fmt.Errorf("%w: UnheardHold %v, want a negative duration (no hold) or at least %v", ErrInvalidConfig, c.UnheardHold, unheardCheck)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.RequestTimeout < 0 {
		return c, fmt.Errorf("%w: RequestTimeout %v, want > 0", ErrInvalidConfig, c.RequestTimeout)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < 100*time.Millisecond {
		return c, fmt.Errorf("%w: LeaseTTL %v, want at least 100ms", ErrInvalidConfig, c.LeaseTTL)
	}
	if c.ReserveChunk == 0 {
		c.ReserveChunk = DefaultReserveChunk
	}
	if c.ReserveChunk < 2 || c.ReserveChunk > 1<<40 {
		return c, fmt.Errorf("%w: ReserveChunk %d, want 2..2^40", ErrInvalidConfig, c.ReserveChunk)
	}
	if c.LogEvery == 0 {
		c.LogEvery = DefaultLogEvery
	}
	if c.LogEvery < 0 {
		return c, fmt.Errorf("%w: LogEvery %v, want > 0", ErrInvalidConfig, c.LogEvery)
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = DefaultMaxClockSkew
	}
	if c.MaxClockSkew < 0 {
		return c, fmt.Errorf("%w: MaxClockSkew %v, want > 0", ErrInvalidConfig, c.MaxClockSkew)
	}
	if err := c.Authorization.validate(); err != nil {
		return c, err
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	n := &c.NATS
	if n.EmbeddedListen == "" {
		n.EmbeddedListen = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(n.EmbeddedListen); err != nil {
		return c, fmt.Errorf("%w: NATS.EmbeddedListen %q, want host:port: %v", ErrInvalidConfig, n.EmbeddedListen, err)
	}
	if n.ReconnectWait == 0 {
		n.ReconnectWait = DefaultReconnectWait
	}
	if n.ReconnectMax == 0 {
		n.ReconnectMax = DefaultReconnectMax
	}
	if n.ReconnectWait < 0 || n.ReconnectMax < n.ReconnectWait {
		return c, fmt.Errorf("%w: NATS.ReconnectWait %v / ReconnectMax %v, want 0 < wait <= max",
			ErrInvalidConfig, n.ReconnectWait, n.ReconnectMax)
	}
	if (n.CertFile == "") != (n.KeyFile == "") {
		return c, fmt.Errorf("%w: NATS.CertFile %q and NATS.KeyFile %q, want both or neither",
			ErrInvalidConfig, n.CertFile, n.KeyFile)
	}
	if (n.EmbeddedCertFile == "") != (n.EmbeddedKeyFile == "") {
		return c, fmt.Errorf("%w: NATS.EmbeddedCertFile %q and NATS.EmbeddedKeyFile %q, want both or neither",
			ErrInvalidConfig, n.EmbeddedCertFile, n.EmbeddedKeyFile)
	}
	if n.EmbeddedCertFile != "" && n.CAFile == "" {
		return c, fmt.Errorf("%w: NATS.EmbeddedCertFile %q without NATS.CAFile, want the CA this node verifies its embedded server by",
			ErrInvalidConfig, n.EmbeddedCertFile)
	}
	if n.EmbeddedCertFile != "" && len(n.URLs) > 0 {
		return c, fmt.Errorf("%w: NATS.EmbeddedCertFile %q with NATS.URLs %v, want one: no embedded server runs with URLs",
			ErrInvalidConfig, n.EmbeddedCertFile, n.URLs)
	}
	if n.Token != "" && n.User != "" {
		return c, fmt.Errorf("%w: NATS.Token and NATS.User both set, want one", ErrInvalidConfig)
	}
	return c, nil
}

const (
	maxTokenLen  = 128
	maxProviders = 8
)

func knownProvider(p string) bool {
	return p == rdma.ProviderShm || p == rdma.ProviderTCP || p == rdma.ProviderVerbs
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ':'
}

// validToken reports whether s can be one NATS subject token and an id.
func validToken(s string) bool {
	if len(s) == 0 || len(s) > maxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

func checkToken(key, s string) error {
	if !validToken(s) {
		return fmt.Errorf("%w: %s %q, want 1..%d of [A-Za-z0-9_:-]", ErrInvalidConfig, key, s, maxTokenLen)
	}
	return nil
}

func sanitizeToken(s string) string {
	b := []byte(s)
	for i := range b {
		if !tokenByte(b[i]) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "node"
	}
	return string(b)
}
