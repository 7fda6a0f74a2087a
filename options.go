package tickbus

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// Option configures Connect. An option that gets a bad value makes Connect
// fail with ErrInvalidOption, naming the option and the value.
type Option func(*options) error

type options struct {
	urls           []string
	embeddedListen string
	user, password string
	token          string
	nkeySeedFile   string
	credsFile      string
	caFile         string
	certFile       string
	keyFile        string
	waitForServer  bool
	nodeID, hostID string
	prefix         string
	provider       string
	tcpListen      string
	tcpAdvertise   string
	connectTimeout time.Duration
	leaseTTL       time.Duration
	unheardHold    time.Duration // 0: the bus default; negative: none
	log            zerolog.Logger
	allowPub       map[string][]string
	allowSub       map[string][]string
	pubDefaults    []PubOption
}

// WithNATS connects to an external NATS server or cluster
// ("nats://host:4222"; several URLs, or one comma-separated string). Without
// it, Connect runs an embedded server on a random loopback port
// (Client.URL names it, for other processes).
func WithNATS(urls ...string) Option {
	return func(o *options) error {
		for _, u := range urls {
			for _, one := range strings.Split(u, ",") {
				if one = strings.TrimSpace(one); one != "" {
					o.urls = append(o.urls, one)
				}
			}
		}
		if len(o.urls) == 0 {
			return optErr("WithNATS", urls, "at least one URL")
		}
		return nil
	}
}

// WithEmbeddedNATS runs the embedded server on listen ("127.0.0.1:4222")
// instead of a random loopback port, so that other processes find it.
func WithEmbeddedNATS(listen string) Option {
	return func(o *options) error {
		if !strings.Contains(listen, ":") {
			return optErr("WithEmbeddedNATS", fmt.Sprintf("%q", listen), "host:port")
		}
		o.embeddedListen = listen
		return nil
	}
}

// WithCredentials authenticates to an external server with a NATS
// credentials file (user JWT and nkey seed).
func WithCredentials(file string) Option {
	return func(o *options) error {
		if file == "" {
			return optErr("WithCredentials", `""`, "a file name")
		}
		o.credsFile = file
		return nil
	}
}

// WithNKeySeed authenticates with the nkey seed in file.
func WithNKeySeed(file string) Option {
	return func(o *options) error {
		if file == "" {
			return optErr("WithNKeySeed", `""`, "a file name")
		}
		o.nkeySeedFile = file
		return nil
	}
}

// WithUserPassword authenticates with a user and password.
func WithUserPassword(user, password string) Option {
	return func(o *options) error {
		if user == "" {
			return optErr("WithUserPassword", `""`, "a user name")
		}
		o.user, o.password = user, password
		return nil
	}
}

// WithAllowPublish lets only the identities keys (public user nkeys,
// "U…", or "*" for every signed identity) publish on topic ("*": every
// topic); without any WithAllowPublish every signed identity may. The
// node's own identity is the user nkey of WithCredentials or WithNKeySeed.
// Repeatable. See SECURITY.md.
func WithAllowPublish(topic string, keys ...string) Option {
	return func(o *options) error {
		if topic == "" || len(keys) == 0 {
			return optErr("WithAllowPublish", fmt.Sprintf("%q %q", topic, keys), "a topic (or *) and at least one key")
		}
		if err := checkKeys("WithAllowPublish", keys); err != nil {
			return err
		}
		if o.allowPub == nil {
			o.allowPub = map[string][]string{}
		}
		o.allowPub[topic] = append(o.allowPub[topic], keys...)
		return nil
	}
}

// WithAllowSubscribe is WithAllowPublish for subscribing.
func WithAllowSubscribe(topic string, keys ...string) Option {
	return func(o *options) error {
		if topic == "" || len(keys) == 0 {
			return optErr("WithAllowSubscribe", fmt.Sprintf("%q %q", topic, keys), "a topic (or *) and at least one key")
		}
		if err := checkKeys("WithAllowSubscribe", keys); err != nil {
			return err
		}
		if o.allowSub == nil {
			o.allowSub = map[string][]string{}
		}
		o.allowSub[topic] = append(o.allowSub[topic], keys...)
		return nil
	}
}

func checkKeys(option string, keys []string) error {
	for _, k := range keys {
		if k != "*" && !nkeys.IsValidPublicUserKey(k) {
			return optErr(option, fmt.Sprintf("%q", k), `a public user nkey (U…) or "*"`)
		}
	}
	return nil
}

// WithToken authenticates with a token.
func WithToken(token string) Option {
	return func(o *options) error {
		if token == "" {
			return optErr("WithToken", `""`, "a token")
		}
		o.token = token
		return nil
	}
}

// WithTLS requires TLS: caFile verifies the server, certFile and keyFile
// (both or neither) authenticate this client.
func WithTLS(caFile, certFile, keyFile string) Option {
	return func(o *options) error {
		if (certFile == "") != (keyFile == "") {
			return optErr("WithTLS", fmt.Sprintf("cert %q, key %q", certFile, keyFile), "both a certificate and a key, or neither")
		}
		if caFile == "" && certFile == "" {
			return optErr("WithTLS", `""`, "a CA file or a client certificate")
		}
		o.caFile, o.certFile, o.keyFile = caFile, certFile, keyFile
		return nil
	}
}

// WithWaitForServer makes Connect retry until its context ends when the
// external server is not up yet.
func WithWaitForServer() Option {
	return func(o *options) error { o.waitForServer = true; return nil }
}

// WithNodeID names this client on the bus (unique per bus; default the
// host id and a random suffix).
func WithNodeID(id string) Option {
	return func(o *options) error {
		if id == "" {
			return optErr("WithNodeID", `""`, "a non-empty id")
		}
		o.nodeID = id
		return nil
	}
}

// WithPrefix is the first token of every NATS subject the client uses
// (default "tickbus"): clients see only the bus of their own prefix.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if prefix == "" {
			return optErr("WithPrefix", `""`, "a non-empty prefix")
		}
		o.prefix = prefix
		return nil
	}
}

// WithHostID names this host (default os.Hostname): peers with the same
// host id reach each other through shared memory.
func WithHostID(id string) Option {
	return func(o *options) error {
		if id == "" {
			return optErr("WithHostID", `""`, "a non-empty id")
		}
		o.hostID = id
		return nil
	}
}

// WithProvider forces one provider for every peer: "shm" (one host only)
// or "tcp". Default: shm to peers on this host, tcp to the others.
func WithProvider(provider string) Option {
	return func(o *options) error {
		switch provider {
		case rdma.ProviderShm, rdma.ProviderTCP:
			o.provider = provider
			return nil
		}
		return optErr("WithProvider", fmt.Sprintf("%q", provider), `"shm" or "tcp"`)
	}
}

// WithTCPListen sets the tcp provider's listen address (default
// 127.0.0.1:0) and, if peers reach it under another one, the address
// advertised to them ("" for the listen address).
func WithTCPListen(listen, advertise string) Option {
	return func(o *options) error {
		if !strings.Contains(listen, ":") {
			return optErr("WithTCPListen", fmt.Sprintf("%q", listen), "host:port")
		}
		o.tcpListen, o.tcpAdvertise = listen, advertise
		return nil
	}
}

// WithConnectTimeout bounds finding a topic's home and connecting to its
// peers when a publisher or subscription starts (default 10s).
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optErr("WithConnectTimeout", d, "> 0")
		}
		o.connectTimeout = d
		return nil
	}
}

// WithLeaseTTL is how long a topic's home, if this client becomes it,
// holds its lease without renewing (default 750ms, at least 100ms). The home
// renews every ttl/4 and gives the home up when it has not renewed for 3/4
// of it; a dead home's successor is elected once the lease expires. A
// longer lease rides out a starved process (a loaded machine, the race
// detector) at the cost of a slower failover when a home dies without
// closing. Every client of one bus should use the same value: the lease
// bucket has one TTL.
func WithLeaseTTL(ttl time.Duration) Option {
	return func(o *options) error {
		if ttl < 100*time.Millisecond {
			return optErr("WithLeaseTTL", ttl, ">= 100ms")
		}
		o.leaseTTL = ttl
		return nil
	}
}

// WithUnheardHold is how long a subscriber or publisher whose node the
// bus lost by heartbeat (it cannot be heard on NATS: its server died, its
// reconnect is slow) keeps its queue pairs, and its ticks, while they stay
// up (default 30s; at least 50ms). hold <= 0 drops such a peer at once, as
// one that left. A dead host is dropped as soon as its queue pair fails
// either way. See bus.Config.UnheardHold.
func WithUnheardHold(hold time.Duration) Option {
	return func(o *options) error {
		if hold > 0 && hold < 50*time.Millisecond {
			return optErr("WithUnheardHold", hold, ">= 50ms, or <= 0 for no hold")
		}
		o.unheardHold = hold
		if hold <= 0 {
			o.unheardHold = -1
		}
		return nil
	}
}

// WithLogger logs control-path events (connects, peers, losses) to log.
// Default: no logging. The hot path never logs.
func WithLogger(log zerolog.Logger) Option {
	return func(o *options) error { o.log = log; return nil }
}

// WithPublisherDefaults applies opts to every publisher of the client,
// those of Client.Publish included, before the options of each
// Client.Publisher call (which win). They are checked here: a bad one
// fails Connect.
func WithPublisherDefaults(opts ...PubOption) Option {
	return func(o *options) error {
		var scratch pubOptions
		if err := applyPubOptions("WithPublisherDefaults", &scratch, opts); err != nil {
			return err
		}
		o.pubDefaults = append(o.pubDefaults, opts...)
		return nil
	}
}

// PubOption configures Client.Publisher.
type PubOption func(*pubOptions) error

func applyPubOptions(call string, o *pubOptions, opts []PubOption) error {
	for _, opt := range opts {
		if opt == nil {
			return optErr(call, "nil", "a PubOption")
		}
		if err := opt(o); err != nil {
			return err
		}
	}
	return nil
}

type pubOptions struct {
	id           string
	publisherID  uint32
	slotSize     int
	journalSlots int
	faa          bool
	maxBatch     int
	timeout      time.Duration
	idle         rdma.IdleStrategy
	rate         float64
}

// WithPublisherID stamps id (non-zero) on every message of the publisher
// (Message.Publisher); default random.
func WithPublisherID(id uint32) PubOption {
	return func(o *pubOptions) error {
		if id == 0 {
			return optErr("WithPublisherID", id, "non-zero")
		}
		o.publisherID = id
		return nil
	}
}

// WithPublisherName names the publisher among the topic's publishers of
// this client (default the client's node id); two publishers of one topic
// in one client need two names.
func WithPublisherName(name string) PubOption {
	return func(o *pubOptions) error {
		if name == "" {
			return optErr("WithPublisherName", `""`, "a non-empty name")
		}
		o.id = name
		return nil
	}
}

// WithSlotSize bounds every message of the topic (slot header included)
// if this publisher becomes the topic's home (default 96 bytes: a tick).
// It must be a multiple of 32 (ring.SlotAlign).
func WithSlotSize(bytes int) PubOption {
	return func(o *pubOptions) error {
		if bytes < ring.MinSlotSize || bytes > ring.MaxSlotSize || bytes%ring.SlotAlign != 0 {
			return optErr("WithSlotSize", bytes, fmt.Sprintf("a multiple of 32 in %d..%d", ring.MinSlotSize, ring.MaxSlotSize))
		}
		o.slotSize = bytes
		return nil
	}
}

// WithJournal keeps the last slots messages at the topic's home (if this
// publisher becomes it), so subscribers recover what a dead publisher
// claimed or an overrun passed over. Default none.
func WithJournal(slots int) PubOption {
	return func(o *pubOptions) error {
		if slots <= 0 || slots > ring.MaxSlots || slots&(slots-1) != 0 {
			return optErr("WithJournal", slots, fmt.Sprintf("a power of two in 1..%d", ring.MaxSlots))
		}
		o.journalSlots = slots
		return nil
	}
}

// WithFetchAndAdd claims sequences with fetch-and-add instead of
// compare-and-swap: cheaper when several free-running publishers share a
// topic; PublishAt needs the default.
func WithFetchAndAdd() PubOption {
	return func(o *pubOptions) error { o.faa = true; return nil }
}

// WithMaxBatch bounds PublishBatch (default 64).
func WithMaxBatch(n int) PubOption {
	return func(o *pubOptions) error {
		if n <= 0 || n > 512 {
			return optErr("WithMaxBatch", n, "1..512")
		}
		o.maxBatch = n
		return nil
	}
}

// WithPublishTimeout bounds each wait of a publish: for the home's answer,
// for room at a reliable subscriber (default 1s).
func WithPublishTimeout(d time.Duration) PubOption {
	return func(o *pubOptions) error {
		if d <= 0 {
			return optErr("WithPublishTimeout", d, "> 0")
		}
		o.timeout = d
		return nil
	}
}

// WithPublishIdle is what a publish does while it waits for completions
// (default rdma.Yield{}; rdma.BusySpin{} for the lowest latency on a core
// of its own).
func WithPublishIdle(idle rdma.IdleStrategy) PubOption {
	return func(o *pubOptions) error {
		if idle == nil {
			return optErr("WithPublishIdle", nil, "an idle strategy")
		}
		o.idle = idle
		return nil
	}
}

// WithRate paces the publisher at perSecond publish calls a second (a
// batch is one), measured from each call's intended time: a call waits
// (through the publisher's idle strategy, parked when far from due) for
// its turn, and a message the call stamps itself (Publish, PublishTick of
// a zero PubTime) carries that intended time, so a stalled publisher shows
// in its subscribers' latency (no coordinated omission). Default: no
// pacing, every call goes at once.
func WithRate(perSecond float64) PubOption {
	return func(o *pubOptions) error {
		if math.IsNaN(perSecond) || perSecond <= 0 || perSecond > 1e9 {
			return optErr("WithRate", perSecond, "a rate in (0, 1e9] per second")
		}
		o.rate = perSecond
		return nil
	}
}

// SubOption configures Client.Subscribe.
type SubOption func(*subOptions) error

type subOptions struct {
	id            string
	slots         int
	slotSize      int
	reliable      bool
	gapTimeout    time.Duration
	maxBatch      int
	idle          rdma.IdleStrategy
	statsInterval time.Duration
	onStats       func(*Stats)
	lockThread    bool
	manual        bool
}

// WithSubscriberName names the subscription among the topic's subscribers
// of this client (default the client's node id); two subscriptions of one
// topic in one client need two names.
func WithSubscriberName(name string) SubOption {
	return func(o *subOptions) error {
		if name == "" {
			return optErr("WithSubscriberName", `""`, "a non-empty name")
		}
		o.id = name
		return nil
	}
}

// WithRing shapes the subscription's ring: slots (a power of two, default
// 4096) of slotSize bytes (default 96; a multiple of 32; it must hold the topic's
// messages).
func WithRing(slots, slotSize int) SubOption {
	return func(o *subOptions) error {
		if slots <= 0 || slots > ring.MaxSlots || slots&(slots-1) != 0 {
			return optErr("WithRing", slots, fmt.Sprintf("slots a power of two in 1..%d", ring.MaxSlots))
		}
		if slotSize < ring.MinSlotSize || slotSize > ring.MaxSlotSize || slotSize%ring.SlotAlign != 0 {
			return optErr("WithRing", slotSize, fmt.Sprintf("a slot size that is a multiple of 32 in %d..%d", ring.MinSlotSize, ring.MaxSlotSize))
		}
		o.slots, o.slotSize = slots, slotSize
		return nil
	}
}

// Reliable makes the subscription reliable: publishers wait for room in
// its ring (and fail with ErrBackPressure after their timeout) instead of
// overwriting what it has not read. The default, lossy, never slows a
// publisher and reports every loss as an event.
func Reliable() SubOption {
	return func(o *subOptions) error { o.reliable = true; return nil }
}

// WithGapTimeout is how long a claimed but unwritten sequence may hold
// the ring before it is reported as a gap (default 100ms).
func WithGapTimeout(d time.Duration) SubOption {
	return func(o *subOptions) error {
		if d <= 0 {
			return optErr("WithGapTimeout", d, "> 0")
		}
		o.gapTimeout = d
		return nil
	}
}

// WithBatch bounds one OnMessages call (default 256).
func WithBatch(n int) SubOption {
	return func(o *subOptions) error {
		if n <= 0 || n > 1<<16 {
			return optErr("WithBatch", n, "1..65536")
		}
		o.maxBatch = n
		return nil
	}
}

// WithPollIdle is what the polling goroutine does when the ring is empty
// (default Adaptive(): spin after the last tick for twice the recent gap
// between ticks, 50 µs to 1 ms, yield, then park up to 1 ms, 4 ms after 1 s
// without ticks; BusySpin() for the lowest latency on a core of its own).
func WithPollIdle(idle rdma.IdleStrategy) SubOption {
	return func(o *subOptions) error {
		if idle == nil {
			return optErr("WithPollIdle", nil, "an idle strategy")
		}
		o.idle = idle
		return nil
	}
}

// WithLockOSThread keeps the polling goroutine on one OS thread.
func WithLockOSThread() SubOption {
	return func(o *subOptions) error { o.lockThread = true; return nil }
}

// WithManualPoll starts no polling goroutine: the caller polls with
// Subscription.Poll, on a goroutine (and thread) of its own choosing, and
// the handler runs inside Poll.
func WithManualPoll() SubOption {
	return func(o *subOptions) error { o.manual = true; return nil }
}

// WithStats calls f with every interval's statistics (latency histogram,
// counters, rate), from the stats goroutine, every interval (default 1s).
// The same statistics go to the dashboard over NATS either way.
func WithStats(interval time.Duration, f func(*Stats)) SubOption {
	return func(o *subOptions) error {
		if interval < 10*time.Millisecond {
			return optErr("WithStats", interval, "at least 10ms")
		}
		if f == nil {
			return optErr("WithStats", nil, "a function")
		}
		o.statsInterval, o.onStats = interval, f
		return nil
	}
}

// WithoutStats turns the stats loop off: no statistics are published.
func WithoutStats() SubOption {
	return func(o *subOptions) error { o.statsInterval = -1; return nil }
}
