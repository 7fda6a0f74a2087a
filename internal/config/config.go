package config

import (
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/feed/itch"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/tick"
)

// Config is the configuration of the demo, pub and sub commands. Its YAML
// keys are the yaml tags below; configs/*.yaml are examples.
type Config struct {
	Log   Log    `yaml:"log"`
	Bus   Bus    `yaml:"bus"`
	Topic string `yaml:"topic"`
	// Idle is the poll loops' idle strategy: adaptive (the default: spin
	// while ticks come, park when idle), spin (one core per poller, lowest
	// latency), yield or backoff.
	Idle string `yaml:"idle"`
	Ring Ring   `yaml:"ring"`
	// JSON prints events and the final summary as JSON lines on stdout
	// instead of text (for scripts; the demo reads its parts this way).
	JSON bool `yaml:"json"`
	Pub  Pub  `yaml:"pub"`
	Feed Feed `yaml:"feed"`
	Sub  Sub  `yaml:"sub"`
	Demo Demo `yaml:"demo"`
}

// Log configures the control-path logger.
type Log struct {
	Level  string `yaml:"level"`  // trace, debug, info, warn, error, disabled
	Format string `yaml:"format"` // console or json
}

// ProviderAuto is bus.provider's default: the provider is picked per peer
// (shm on one host, tcp across hosts).
const ProviderAuto = "auto"

// Override is the provider forced for every peer, or "" for auto.
func (b *Bus) Override() string {
	if b.Provider == ProviderAuto {
		return ""
	}
	return b.Provider
}

// Bus configures the node's control plane.
type Bus struct {
	// NATS lists server URLs; empty runs an embedded server.
	NATS []string `yaml:"nats"`
	// Listen is the embedded server's host:port (default 127.0.0.1:0).
	Listen string `yaml:"listen"`
	NodeID string `yaml:"node_id"`
	HostID string `yaml:"host_id"`
	Prefix string `yaml:"prefix"`
	// Provider is auto (or ""; the default): shm to peers on this host, tcp
	// to the others; or shm, tcp or verbs for every peer of this node.
	Provider string `yaml:"provider"`
	// TCPListen is the tcp provider's listen host:port (default
	// 127.0.0.1:0); TCPAdvertise the host:port peers on other hosts dial, if
	// it differs (behind NAT, or when listening on 0.0.0.0).
	TCPListen    string `yaml:"tcp_listen"`
	TCPAdvertise string `yaml:"tcp_advertise"`
	// HeartbeatInterval and HeartbeatTimeout: a peer silent for the timeout
	// is dropped and its queue pairs closed.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	HeartbeatTimeout  time.Duration `yaml:"heartbeat_timeout"`
	User              string        `yaml:"user"`
	Password          string        `yaml:"password"`
	Token             string        `yaml:"token"`
	CredsFile         string        `yaml:"creds_file"`
	NKeySeedFile      string        `yaml:"nkey_seed_file"`
	CAFile            string        `yaml:"ca_file"`
	CertFile          string        `yaml:"cert_file"`
	KeyFile           string        `yaml:"key_file"`
	// EmbeddedCertFile and EmbeddedKeyFile make the embedded server speak
	// TLS only (ca_file, required with them, verifies it; with cert_file
	// and key_file it requires client certificates too).
	EmbeddedCertFile string `yaml:"embedded_cert_file"`
	EmbeddedKeyFile  string `yaml:"embedded_key_file"`
	// Authorization says which identities (public user nkeys, U…) may
	// publish and subscribe on which topics ("*": every topic); an empty
	// list allows every identity that signs its messages (the default).
	Authorization Authorization `yaml:"authorization"`
	// LeaseTTL is how long a topic's home holds its JetStream lease without
	// renewing (0: the bus default, under a second, for a fast failover; at
	// least 100ms). A loaded host that misses renewals fails over needlessly:
	// give it more.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// UnheardHold is how long a peer dropped by heartbeat keeps its queue
	// pairs while they stay up (0: the bus default, 30s; at least 50ms;
	// negative: drop it at once): a node away from NATS is not a dead one.
	UnheardHold time.Duration `yaml:"unheard_hold"`
}

// Authorization maps a topic (or "*") to the identities allowed on it: public
// user nkeys, or "*" for every signed identity.
type Authorization struct {
	Publish   map[string][]string `yaml:"publish"`
	Subscribe map[string][]string `yaml:"subscribe"`
}

// MaxRingBytes is the largest ring (ring.slots x ring.slot_size) and
// journal (ring.journal x ring.slot_size) a configuration may ask for: both
// are pre-touched at start, so a larger one would stall the host. One over
// half of the host's physical memory is refused too. (ring.MaxRegionBytes
// bounds them the same way for programs.)
const MaxRingBytes = 4 << 30

// Ring configures a subscriber's ring.
type Ring struct {
	Slots    int    `yaml:"slots"`     // a power of two
	SlotSize int    `yaml:"slot_size"` // bytes per slot, header included; a multiple of 32
	Mode     string `yaml:"mode"`      // lossy or reliable
	// GapTimeout is how long a reader waits on a claimed but unwritten
	// sequence before it reports a gap.
	GapTimeout time.Duration `yaml:"gap_timeout"`
	// Journal is how many recent ticks the topic's home keeps for
	// subscribers to recover gaps and overruns from (a power of two; 0:
	// none). Used by the publisher that becomes the topic's home.
	Journal int `yaml:"journal"`
}

// Pub configures `tickbus pub` and the demo's publisher.
type Pub struct {
	// Rate in ticks per second; 0 publishes as fast as possible.
	Rate float64 `yaml:"rate"`
	// Duration of the run; 0 runs until interrupted.
	Duration        time.Duration `yaml:"duration"`
	Batch           int           `yaml:"batch"` // ticks per PublishBatch
	Instruments     int           `yaml:"instruments"`
	FirstInstrument uint64        `yaml:"first_instrument"`
	Venue           string        `yaml:"venue"`
	StartPrice      float64       `yaml:"start_price"`
	TickSize        float64       `yaml:"tick_size"`
	TradeRatio      float64       `yaml:"trade_ratio"`
	Seed            uint64        `yaml:"seed"`
	// Wait is how long to wait for WaitSubscribers subscribers before
	// publishing; 0 publishes at once.
	Wait            time.Duration `yaml:"wait"`
	WaitSubscribers int           `yaml:"wait_subscribers"`
	// Timeout bounds each wait of a publish: the home's answer to a claim
	// (over tcp, a round trip to another process), room at reliable
	// subscribers; 0 is the publisher's default (1 s). A claim that times
	// out makes the publisher fail over (or reconnect to the same home).
	Timeout time.Duration `yaml:"timeout"`
}

// Feed says what `tickbus pub` publishes: the synthetic random walk (pub
// keys) or a replay of a file.
type Feed struct {
	// Kind is random (the default), itch (a Nasdaq TotalView-ITCH 5.0
	// file) or csv (see feed/csv for its header).
	Kind string `yaml:"kind"`
	// File is the file an itch or csv replay reads.
	File string `yaml:"file"`
	// Speed of a replay: 0 as fast as flow control allows, 1 the original
	// pace, N N times faster.
	Speed float64 `yaml:"speed"`
	// Date is an ITCH file's trading day, YYYY-MM-DD; default the MMDDYYYY
	// date that starts Nasdaq's file names.
	Date string `yaml:"date"`
	// Line is A or B for one of two redundant lines replaying the same
	// file onto one topic (each tick at a fixed sequence through
	// PublishAt; the topic must be fresh); "" for none.
	Line string `yaml:"line"`
	// LineWindow is how long a line ahead of the other waits for it to
	// fill a sequence before declaring it missing (default 1ms).
	LineWindow time.Duration `yaml:"line_window"`
	// Progress draws a progress bar on stderr for files over 1 MiB.
	Progress bool `yaml:"progress"`
}

// Feed kinds.
const (
	FeedRandom = "random"
	FeedITCH   = "itch"
	FeedCSV    = "csv"
)

// Sub configures `tickbus sub` and the demo's subscribers.
type Sub struct {
	// Print shows every tick.
	Print bool `yaml:"print"`
	// Interval between the status lines.
	Interval time.Duration `yaml:"interval"`
	// Duration of the run; 0 runs until interrupted.
	Duration time.Duration `yaml:"duration"`
	// SeqLog, if set, is a file that gets every delivered sequence (a
	// debugging aid; tests compare two subscribers' orders with it).
	SeqLog string `yaml:"seq_log"`
}

// Demo configures `tickbus demo`.
type Demo struct {
	Duration    time.Duration `yaml:"duration"`
	Subscribers int           `yaml:"subscribers"`
	// Dash is the dashboard's listen address; "" turns it off.
	Dash string `yaml:"dash"`
}

// Default is the configuration before any file or flag.
func Default() Config {
	f := publisher.DefaultFeedConfig()
	return Config{
		Log:   Log{Level: "info", Format: "console"},
		Topic: "demo",
		Idle:  "adaptive",
		Ring:  Ring{Slots: 1 << 14, SlotSize: 96, Mode: "lossy", GapTimeout: 100 * time.Millisecond, Journal: 4096},
		Pub: Pub{Rate: 10_000, Batch: 1, Instruments: f.Instruments, FirstInstrument: f.FirstInstrument,
			Venue: f.Venue, StartPrice: f.StartPrice, TickSize: f.TickSize, TradeRatio: f.TradeRatio, Seed: f.Seed, WaitSubscribers: 1},
		Feed: Feed{Kind: FeedRandom, Progress: true},
		Sub:  Sub{Interval: time.Second},
		Demo: Demo{Duration: 5 * time.Second, Subscribers: 2, Dash: "127.0.0.1:0"},
	}
}

// FeedConfig is the synthetic feed Pub describes.
func (p Pub) FeedConfig() publisher.FeedConfig {
	return publisher.FeedConfig{
		Instruments: p.Instruments, FirstInstrument: p.FirstInstrument, Venue: p.Venue,
		StartPrice: p.StartPrice, TickSize: p.TickSize, TradeRatio: p.TradeRatio, Seed: p.Seed,
	}
}

// bad builds an error naming key, value and what was expected.
func bad(key string, value any, want string) error {
	return fmt.Errorf("%w: %s = %v: want %s", ErrBadValue, key, fmtValue(value), want)
}

func fmtValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case []string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}

// Validate checks c for command cmd ("demo", "pub" or "sub"), naming the
// first bad key, its value and what was expected.
func (c *Config) Validate(cmd string) error {
	if _, err := c.Logger(nil); err != nil {
		return err
	}
	if _, err := rdma.ParseIdle(c.Idle); err != nil || strings.TrimSpace(c.Idle) == "" {
		return bad("idle", c.Idle, "adaptive, spin, yield or backoff")
	}
	if err := checkTopic(c.Topic, cmd == "sub"); err != nil {
		return err
	}
	if err := c.Bus.validate(cmd); err != nil {
		return err
	}
	if err := c.Ring.validate(); err != nil {
		return err
	}
	switch cmd {
	case "pub", "demo":
		if err := c.Pub.validate(c.Ring); err != nil {
			return err
		}
	}
	if cmd == "pub" {
		if err := c.Feed.validate(); err != nil {
			return err
		}
	}
	switch cmd {
	case "sub", "demo":
		if c.Sub.Interval < 10*time.Millisecond {
			return bad("sub.interval", c.Sub.Interval, "at least 10ms")
		}
		if c.Sub.Duration < 0 {
			return bad("sub.duration", c.Sub.Duration, "0 (until interrupted) or a positive duration")
		}
	}
	if cmd == "demo" {
		if c.Demo.Duration <= 0 || c.Demo.Duration > 24*time.Hour {
			return bad("demo.duration", c.Demo.Duration, "a positive duration up to 24h")
		}
		if c.Demo.Subscribers < 1 || c.Demo.Subscribers > 16 {
			return bad("demo.subscribers", c.Demo.Subscribers, "1..16")
		}
		if c.Pub.Rate == 0 {
			return bad("pub.rate", c.Pub.Rate, "a positive rate for the demo (its subscribers must keep up to lose nothing)")
		}
	}
	return nil
}

// checkTopic: a topic of up to 8 dotted tokens (md.nasdaq.itch); for a
// subscriber also a pattern (md.nasdaq.>, md.*.itch).
func checkTopic(t string, pattern bool) error {
	if pattern && bus.IsPattern(t) {
		if _, err := bus.ParsePattern(t); err != nil {
			return bad("topic", t, "up to 8 dot-separated tokens of [A-Za-z0-9_:-], '*' for one token or a final '>' for the rest, such as md.nasdaq.> or md.*.itch")
		}
		return nil
	}
	if t == "" || len(t) > bus.MaxTopicLen {
		return bad("topic", t, "1..128 characters: up to 8 tokens of [A-Za-z0-9_:-] joined by dots, such as equities or md.nasdaq.itch")
	}
	if err := bus.CheckTopic(t); err != nil {
		return bad("topic", t, "up to 8 tokens of [A-Za-z0-9_:-] joined by dots, such as equities or md.nasdaq.itch")
	}
	return nil
}

func (f *Feed) validate() error {
	switch f.Kind {
	case FeedRandom, "":
		if f.Line != "" {
			return bad("feed.line", f.Line, `"" with feed.kind random (A/B lines replay one file: feed.kind itch or csv)`)
		}
		return nil
	case FeedITCH, FeedCSV:
	default:
		return bad("feed.kind", f.Kind, "random, itch or csv")
	}
	if f.File == "" {
		return bad("feed.file", f.File, "the path of the "+f.Kind+" file to replay")
	}
	if st, err := os.Stat(f.File); err != nil || st.IsDir() {
		return bad("feed.file", f.File, "a readable "+f.Kind+" file")
	}
	if math.IsNaN(f.Speed) || f.Speed < 0 || f.Speed > 1e6 {
		return bad("feed.speed", f.Speed, "0 (as fast as flow control allows), 1 (original pace) or N (N times faster, up to 1e6)")
	}
	if f.Line != "" && f.Line != "A" && f.Line != "B" {
		return bad("feed.line", f.Line, `A or B (or "" for no line)`)
	}
	if f.LineWindow < 0 {
		return bad("feed.line_window", f.LineWindow, "0 (default 1ms) or a positive duration")
	}
	if f.Kind == FeedITCH {
		if _, err := f.ITCHDate(); err != nil {
			return err
		}
	}
	return nil
}

// ITCHDate is the trading day of an ITCH replay: feed.date, else the
// MMDDYYYY date starting the file's name.
func (f *Feed) ITCHDate() (time.Time, error) {
	if f.Date != "" {
		d, err := time.Parse(time.DateOnly, f.Date)
		if err != nil {
			return time.Time{}, bad("feed.date", f.Date, "a date YYYY-MM-DD, such as 2019-01-30")
		}
		return d, nil
	}
	d, ok := itch.DateFromName(f.File)
	if !ok {
		return time.Time{}, bad("feed.date", f.Date, "the file's trading day YYYY-MM-DD (its name does not start with MMDDYYYY)")
	}
	return d, nil
}

func (b *Bus) validate(cmd string) error {
	for _, u := range b.NATS {
		if u == "" || strings.ContainsAny(u, " \t") {
			return bad("bus.nats", b.NATS, "server URLs such as nats://127.0.0.1:4222")
		}
	}
	switch b.Provider {
	case "", ProviderAuto, rdma.ProviderShm, rdma.ProviderTCP, rdma.ProviderVerbs:
	default:
		return bad("bus.provider", b.Provider, `auto (shm on one host, tcp across hosts), shm, tcp or verbs`)
	}
	for key, v := range map[string]string{"bus.tcp_listen": b.TCPListen, "bus.tcp_advertise": b.TCPAdvertise} {
		if v == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
			return bad(key, v, "host:port, such as 10.0.0.5:7471 (port 0 picks one)")
		}
	}
	if b.HeartbeatInterval < 0 {
		return bad("bus.heartbeat_interval", b.HeartbeatInterval, "0 (default) or a positive duration")
	}
	if b.HeartbeatTimeout < 0 || (b.HeartbeatTimeout > 0 && b.HeartbeatInterval > 0 && b.HeartbeatTimeout < 2*b.HeartbeatInterval) {
		return bad("bus.heartbeat_timeout", b.HeartbeatTimeout, "0 (default) or at least twice bus.heartbeat_interval")
	}
	if b.LeaseTTL != 0 && b.LeaseTTL < 100*time.Millisecond {
		return bad("bus.lease_ttl", b.LeaseTTL, "0 (default) or at least 100ms")
	}
	if b.UnheardHold > 0 && b.UnheardHold < 50*time.Millisecond {
		return bad("bus.unheard_hold", b.UnheardHold, "0 (default), at least 50ms, or negative (no hold)")
	}
	if (b.CertFile == "") != (b.KeyFile == "") {
		return bad("bus.cert_file", b.CertFile, "bus.cert_file and bus.key_file both set or both empty")
	}
	for name, m := range map[string]map[string][]string{"publish": b.Authorization.Publish, "subscribe": b.Authorization.Subscribe} {
		for topic, ids := range m {
			key := "bus.authorization." + name + "." + topic
			if topic != "*" {
				if err := checkTopic(topic, false); err != nil {
					return bad(key, topic, `a topic (up to 8 tokens of [A-Za-z0-9_:-] joined by dots) or "*" (every topic)`)
				}
			}
			for _, id := range ids {
				if id != "*" && !nkeys.IsValidPublicUserKey(id) {
					return bad(key, id, `a public user nkey (U… as "nsc" or "nk -gen user -pubout" prints it) or "*" (every signed identity)`)
				}
			}
		}
	}
	return nil
}

func (r *Ring) validate() error {
	if r.Slots < 2 || r.Slots > 1<<24 || r.Slots&(r.Slots-1) != 0 {
		return bad("ring.slots", r.Slots, "a power of two from 2 to 16777216")
	}
	if r.Journal < 0 || r.Journal > 1<<24 || r.Journal&(r.Journal-1) != 0 {
		return bad("ring.journal", r.Journal, "0 (no journal) or a power of two up to 16777216")
	}
	if r.SlotSize < 64 || r.SlotSize > 1<<20 || r.SlotSize%32 != 0 {
		return bad("ring.slot_size", r.SlotSize, "a multiple of 32 from 64 to 1048576")
	}
	if r.SlotSize-32 < tick.Size {
		return bad("ring.slot_size", r.SlotSize, fmt.Sprintf("room for a %d-byte tick after the 32-byte slot header (at least 96)", tick.Size))
	}
	if size := uint64(r.Slots) * uint64(r.SlotSize); size > MaxRingBytes {
		return bad("ring.slots", r.Slots, fmt.Sprintf("ring.slots x ring.slot_size (%d x %d = %s) at most %s, the documented maximum",
			r.Slots, r.SlotSize, bytesText(size), bytesText(MaxRingBytes)))
	} else if mem := physicalMemory(); mem > 0 && size > mem/2 {
		return bad("ring.slots", r.Slots, fmt.Sprintf("ring.slots x ring.slot_size (%d x %d = %s) at most half of this host's %s of memory",
			r.Slots, r.SlotSize, bytesText(size), bytesText(mem)))
	}
	if size := uint64(r.Journal) * uint64(r.SlotSize); size > MaxRingBytes {
		return bad("ring.journal", r.Journal, fmt.Sprintf("ring.journal x ring.slot_size (%d x %d = %s) at most %s, the documented maximum (the home pre-touches its journal)",
			r.Journal, r.SlotSize, bytesText(size), bytesText(MaxRingBytes)))
	} else if mem := physicalMemory(); mem > 0 && size > mem/2 {
		return bad("ring.journal", r.Journal, fmt.Sprintf("ring.journal x ring.slot_size (%d x %d = %s) at most half of this host's %s of memory",
			r.Journal, r.SlotSize, bytesText(size), bytesText(mem)))
	}
	if r.Mode != "lossy" && r.Mode != "reliable" {
		return bad("ring.mode", r.Mode, "lossy (never slow the publisher) or reliable (publishers wait for room)")
	}
	if r.GapTimeout < 0 {
		return bad("ring.gap_timeout", r.GapTimeout, "0 (default) or a positive duration")
	}
	return nil
}

func (p *Pub) validate(r Ring) error {
	switch {
	case math.IsNaN(p.Rate) || p.Rate < 0 || p.Rate > 1e9:
		return bad("pub.rate", p.Rate, "0 (as fast as possible) up to 1e9 ticks per second")
	case p.Duration < 0:
		return bad("pub.duration", p.Duration, "0 (until interrupted) or a positive duration")
	case p.Batch < 1 || p.Batch > r.Slots/2:
		return bad("pub.batch", p.Batch, fmt.Sprintf("1 to half of ring.slots (%d)", r.Slots/2))
	case p.Wait < 0:
		return bad("pub.wait", p.Wait, "0 or a positive duration")
	case p.WaitSubscribers < 0 || p.WaitSubscribers > 1024:
		return bad("pub.wait_subscribers", p.WaitSubscribers, "0..1024")
	case p.Timeout < 0 || p.Timeout > time.Hour:
		return bad("pub.timeout", p.Timeout, "0 (the default, 1s) or a positive duration up to 1h")
	}
	switch {
	case p.Instruments < 1 || p.Instruments > 1<<20:
		return bad("pub.instruments", p.Instruments, "1..1048576")
	case p.FirstInstrument == 0 || p.FirstInstrument > math.MaxUint64-uint64(p.Instruments):
		return bad("pub.first_instrument", p.FirstInstrument, "an id > 0 with room for pub.instruments ids above it")
	case !(p.StartPrice > 0) || p.StartPrice > 1e9:
		return bad("pub.start_price", p.StartPrice, "a price > 0 and at most 1e9")
	case !(p.TickSize > 0) || tick.PriceFromFloat(p.TickSize) < 1:
		return bad("pub.tick_size", p.TickSize, "a price step of at least 0.00000001")
	case !(p.TradeRatio >= 0 && p.TradeRatio <= 1):
		return bad("pub.trade_ratio", p.TradeRatio, "a fraction from 0 to 1")
	}
	if _, err := tick.ParseVenue(p.Venue); err != nil {
		return bad("pub.venue", p.Venue, `a 4-character MIC of upper-case letters and digits such as XNAS, or ""`)
	}
	if err := p.FeedConfig().Validate(); err != nil {
		return fmt.Errorf("%w: pub: %w", ErrBadValue, err)
	}
	return nil
}
