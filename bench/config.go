package bench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// Case names, in the order the table shows them.
const (
	CaseTickbusShm = "tickbus-shm"
	CaseTickbusTCP = "tickbus-tcp"
	CaseNATS       = "nats"
	CaseChan       = "chan"
	CaseFloor      = "floor"
	CaseJitter     = "jitter"
)

// AllCases lists every case in table order.
var AllCases = []string{CaseTickbusShm, CaseTickbusTCP, CaseNATS, CaseChan, CaseFloor, CaseJitter}

// CaseTickbusTCPRemoteHome is tickbus-tcp with the topic's home in the
// subscriber's process, so that every claim of the publisher is a tcp
// round trip (what a second publisher of a topic pays). Run only when
// named in Cases, after the others.
const CaseTickbusTCPRemoteHome = "tickbus-tcp-remotehome"

// ExtraCases run only when named.
var ExtraCases = []string{CaseTickbusTCPRemoteHome}

// ErrInvalidConfig wraps every configuration error; the message names the
// key, the value and what was expected.
var ErrInvalidConfig = errors.New("bench: invalid config")

// Config is one bench run. The zero value is not valid; start from
// DefaultConfig (RegisterFlags installs its values as flag defaults). Its
// YAML keys are the flag names.
type Config struct {
	// Duration of each paced latency (or ping-pong) run per case.
	Duration time.Duration `yaml:"duration"`
	// ThroughputDuration of each throughput run (single and batched) per case
	// and of each scaling point.
	ThroughputDuration time.Duration `yaml:"tp-duration"`
	// Rate of the paced latency run, ticks per second.
	Rate int `yaml:"rate"`
	// Size of a message in bytes (the tick is 64); at least MinSize.
	Size int `yaml:"size"`
	// Batch is how many ticks one batched send carries.
	Batch int `yaml:"batch"`
	// Cases to run, by name (AllCases if empty).
	Cases []string `yaml:"cases"`
	// CPUs pins the hot threads: the publisher's to CPUs[0], the
	// subscriber's to CPUs[1] (and so on, round robin). Empty: not pinned.
	CPUs []int `yaml:"cpus"`
	// Idle is the idle strategy of every poll and pacing loop: "spin",
	// "yield" (default) or "backoff" (see rdma.ParseIdle). Yield lets a
	// provider's own goroutines (tcp's flusher and responder) run on a
	// machine with fewer cores than spinning threads; spin is the lowest
	// latency where every hot thread has a core of its own.
	Idle string `yaml:"idle"`
	// RingMode of the tickbus cases' subscriber rings: "reliable" (the
	// publisher waits for room, as the chan and floor cases do) or "lossy"
	// (the publisher never waits; overruns show as lost).
	RingMode string `yaml:"ring-mode"`
	// RingSlots is the ring size of the shm cases, in slots (a power of
	// two): each tickbus subscriber's ring, the floor's ring and the chan
	// case's capacity in messages. A ring larger than the cores' caches
	// moves more per second between processes, as Aeron's 16 MiB terms
	// do: the publisher then writes lines no reader still holds.
	RingSlots int `yaml:"ring-slots"`
	// Claim is how tickbus publishers claim sequences: "cas" or "faa".
	Claim string `yaml:"claim"`
	// PingPong measures round trips (publisher to subscriber and back on a
	// second topic) instead of one-way latency.
	PingPong bool `yaml:"pingpong"`
	// Scaling adds the fan-out (1, 2, 4, 8 subscribers) and contention (1,
	// 2, 4 publishers) runs of tickbus-shm, as a table and an SVG plot.
	Scaling bool `yaml:"scaling"`
	// Quick shortens every run so the whole bench ends within 20 s.
	Quick bool `yaml:"quick"`
	// JSON, if set, is the file the per-case results are written to.
	JSON string `yaml:"json"`
	// Out, if set, is the directory for HdrHistogram logs (one .hlog per
	// case) and the scaling plot.
	Out string `yaml:"out"`
	// Profile writes a CPU profile (pprof) of every publisher and
	// subscriber process under Out, one file per process and run.
	Profile bool `yaml:"pprof"`
	// Trace writes an execution trace (runtime/trace; read it with go
	// tool trace) of every publisher and subscriber process under Out:
	// where each goroutine waited, and for what.
	Trace bool `yaml:"trace"`
	// Logger for control-path events; zerolog.Nop() if zero.
	Logger zerolog.Logger `yaml:"-"`
}

// DefaultRingSlots is a tickbus subscription's default ring size
// (tickbus.WithRing): the bench measures what a user gets.
const DefaultRingSlots = subscriber.DefaultSlots

// minRingSlots keeps a whole batch of the largest size in one ring;
// maxRingSlots (ring.MaxSlots) bounds the region.
const (
	minRingSlots = 4096
	maxRingSlots = ring.MaxSlots
)

func validRingSlots(n int) bool { return n >= minRingSlots && n <= maxRingSlots && n&(n-1) == 0 }

// MinSize is the smallest message: a sequence and a tick.
const MinSize = 8 + tick.Size

// MaxSize bounds a message so that a ring slot stays within a page.
const MaxSize = 4096

// DefaultConfig is a full run that ends within about a minute on 2 cores.
// Its paced rate, 20k ticks/s, is one that every case but tickbus-tcp
// sustains on a busy 2-core machine, so the latency figures are latency,
// not a queue; raise --rate where cores are free.
func DefaultConfig() Config {
	return Config{
		Duration:           3 * time.Second,
		ThroughputDuration: time.Second,
		Rate:               20_000,
		Size:               64,
		Batch:              64,
		Idle:               "yield",
		RingMode:           "reliable",
		RingSlots:          DefaultRingSlots,
		Claim:              "cas",
		Scaling:            true,
		Logger:             zerolog.Nop(),
	}
}

// quick shortens the run: ends within 20 s.
func (c Config) quick() Config {
	if c.Duration > 300*time.Millisecond {
		c.Duration = 300 * time.Millisecond
	}
	if c.ThroughputDuration > 100*time.Millisecond {
		c.ThroughputDuration = 100 * time.Millisecond
	}
	if c.Rate > 10_000 {
		c.Rate = 10_000
	}
	return c
}

// RegisterFlags binds the config to fs, with c's current values as
// defaults (call it on DefaultConfig()).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Duration, "duration", c.Duration, "paced latency run per case")
	fs.DurationVar(&c.ThroughputDuration, "tp-duration", c.ThroughputDuration, "each throughput run (single, batched, scaling point)")
	fs.IntVar(&c.Rate, "rate", c.Rate, "paced rate of the latency run, ticks/s")
	fs.IntVar(&c.Size, "size", c.Size, "message size in bytes ("+strconv.Itoa(MinSize)+".."+strconv.Itoa(MaxSize)+")")
	fs.IntVar(&c.Batch, "batch", c.Batch, "ticks per batched send")
	fs.Func("cases", "comma-separated cases (default all: "+strings.Join(AllCases, ",")+")", func(s string) error {
		c.Cases = splitList(s)
		return nil
	})
	fs.Func("cpus", "comma-separated CPUs to pin the hot threads to (publisher first); empty: no pinning", func(s string) error {
		cpus, err := parseCPUs(s)
		if err != nil {
			return err
		}
		c.CPUs = cpus
		return nil
	})
	fs.StringVar(&c.Idle, "idle", c.Idle, "idle strategy of poll and pacing loops: spin, yield or backoff")
	fs.StringVar(&c.RingMode, "ring-mode", c.RingMode, "tickbus subscriber rings: reliable (publisher waits for room) or lossy (overruns are counted as lost)")
	fs.IntVar(&c.RingSlots, "ring-slots", c.RingSlots, "slots per ring of the tickbus subscribers, the floor and the chan case (a power of two)")
	fs.StringVar(&c.Claim, "claim", c.Claim, "tickbus sequence claim: cas or faa")
	fs.BoolVar(&c.PingPong, "pingpong", c.PingPong, "measure round trips (to the subscriber and back on a second topic)")
	fs.BoolVar(&c.Scaling, "scaling", c.Scaling, "run tickbus-shm fan-out (1,2,4,8 subs) and contention (1,2,4 pubs)")
	fs.BoolVar(&c.Quick, "quick", c.Quick, "short runs: the whole bench ends within 20 s (a smoke check)")
	fs.StringVar(&c.JSON, "json", c.JSON, "write per-case results to this JSON file")
	fs.BoolVar(&c.Profile, "pprof", c.Profile, "write a CPU profile of every publisher and subscriber process under --out")
	fs.BoolVar(&c.Trace, "trace", c.Trace, "write an execution trace (go tool trace) of every publisher and subscriber process under --out")
	fs.StringVar(&c.Out, "out", c.Out, "directory for HdrHistogram logs (.hlog) and the scaling plot (.svg)")
}

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	bad := func(key string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidConfig, key, v, want)
	}
	switch {
	case c.Duration < time.Millisecond || c.Duration > time.Hour:
		return bad("duration", c.Duration, "1ms..1h")
	case c.ThroughputDuration < time.Millisecond || c.ThroughputDuration > time.Hour:
		return bad("tp-duration", c.ThroughputDuration, "1ms..1h")
	case c.Rate < 1 || c.Rate > 100_000_000:
		return bad("rate", c.Rate, "1..100000000 ticks/s")
	case c.Size < MinSize || c.Size > MaxSize:
		return bad("size", c.Size, fmt.Sprintf("%d..%d bytes", MinSize, MaxSize))
	case c.Batch < 1 || c.Batch > 4096:
		return bad("batch", c.Batch, "1..4096")
	case !validRingSlots(c.RingSlots):
		return bad("ring-slots", c.RingSlots, fmt.Sprintf("a power of two in %d..%d", minRingSlots, maxRingSlots))
	}
	for _, name := range c.Cases {
		if !knownCase(name) {
			return bad("cases", name, "one of "+strings.Join(append(append([]string{}, AllCases...), ExtraCases...), ","))
		}
	}
	for _, cpu := range c.CPUs {
		if cpu < 0 || cpu >= 1024 {
			return bad("cpus", cpu, "0..1023")
		}
	}
	if c.Profile && c.Out == "" {
		return bad("pprof", c.Profile, "--out set (profiles are written there)")
	}
	if c.Trace && c.Out == "" {
		return bad("trace", c.Trace, "--out set (traces are written there)")
	}
	if _, err := ring.ParseMode(c.RingMode); err != nil {
		return bad("ring-mode", c.RingMode, "lossy or reliable")
	}
	if _, err := ring.ParseClaimMode(c.Claim); err != nil {
		return bad("claim", c.Claim, "cas or faa")
	}
	if _, err := rdma.ParseIdle(c.Idle); err != nil {
		return bad("idle", c.Idle, "spin, yield or backoff")
	}
	return nil
}

func knownCase(name string) bool {
	for _, n := range append(append([]string{}, AllCases...), ExtraCases...) {
		if n == name {
			return true
		}
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n >= 1024 {
			return nil, fmt.Errorf("%w: cpus = %q, want CPU numbers 0..1023", ErrInvalidConfig, f)
		}
		cpus = append(cpus, n)
	}
	return cpus, nil
}

// selected returns the cases to run, in table order.
func (c Config) selected() []string {
	if len(c.Cases) == 0 {
		return AllCases
	}
	var out []string
	for _, n := range append(append([]string{}, AllCases...), ExtraCases...) {
		for _, want := range c.Cases {
			if n == want {
				out = append(out, n)
				break
			}
		}
	}
	return out
}
