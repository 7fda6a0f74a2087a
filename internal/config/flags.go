package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// RegisterCommon adds the flags every command takes: --config, --log-level
// and --log-format.
func RegisterCommon(fs *flag.FlagSet, file *string, log *Log) {
	fs.StringVar(file, "config", "", "YAML configuration `file`; flags given on the command line override it")
	fs.StringVar(&log.Level, "log-level", log.Level, "log `level`: trace, debug, info, warn, error or disabled")
	fs.StringVar(&log.Format, "log-format", log.Format, "log `format`: console or json")
}

// RegisterFlags adds the flags of command cmd ("demo", "pub" or "sub"),
// each bound to its field of c, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet, cmd string) {
	topicHelp := "`topic` to publish to: up to 8 tokens of [A-Za-z0-9_:-] joined by dots (md.nasdaq.itch)"
	if cmd == "sub" {
		topicHelp = "`topic` or pattern to subscribe to: md.nasdaq.itch, md.nasdaq.> (every topic below) or md.*.itch (any one token)"
	}
	fs.StringVar(&c.Topic, "topic", c.Topic, topicHelp)
	fs.StringVar(&c.Idle, "idle", c.Idle, "poll loops' idle `strategy`: adaptive (spin while ticks come, park when idle), spin (a core per poller, lowest latency), yield or backoff")
	fs.StringVar(&c.Bus.Provider, "provider", c.Bus.Provider, `data-plane `+"`provider`"+`: auto picks per peer (shm on one host, tcp across hosts), or shm, tcp, verbs for every peer`)
	fs.IntVar(&c.Ring.Slots, "slots", c.Ring.Slots, "ring `slots` per subscriber (a power of two)")
	fs.IntVar(&c.Ring.SlotSize, "slot-size", c.Ring.SlotSize, "`bytes` per ring slot, 32-byte header included (a multiple of 32)")
	if cmd != "demo" {
		fs.BoolVar(&c.JSON, "json", c.JSON, "print events and the final summary as JSON lines on stdout")
		fs.Var((*urlList)(&c.Bus.NATS), "nats", "NATS server `URLs`, comma-separated; empty runs an embedded server")
		fs.StringVar(&c.Bus.NodeID, "node-id", c.Bus.NodeID, "this node's `id` on the bus (default: host id and a random suffix)")
		fs.StringVar(&c.Bus.HostID, "host-id", c.Bus.HostID, "this node's host `id`: nodes with the same one use shm between them (default: the hostname)")
		fs.DurationVar(&c.Bus.UnheardHold, "unheard-hold", c.Bus.UnheardHold, "how `long` a peer the bus lost by heartbeat keeps its queue pairs while they stay up (0: the bus default, 30s; negative: drop it at once)")
		fs.DurationVar(&c.Bus.LeaseTTL, "lease-ttl", c.Bus.LeaseTTL, "how `long` a topic's home holds its lease without renewing (0: the bus default; longer rides out a loaded host, shorter fails over faster)")
		fs.StringVar(&c.Bus.TCPListen, "tcp-listen", c.Bus.TCPListen, "the tcp provider's listen `host:port` (default 127.0.0.1:0; set it to reach other hosts)")
		fs.StringVar(&c.Bus.TCPAdvertise, "tcp-advertise", c.Bus.TCPAdvertise, "the `host:port` peers on other hosts dial, if not the listen address")
		fs.StringVar(&c.Bus.CredsFile, "creds", c.Bus.CredsFile, "NATS credentials `file`; its user nkey is also this node's identity on the bus")
		fs.StringVar(&c.Bus.NKeySeedFile, "nkey", c.Bus.NKeySeedFile, "NATS user nkey seed `file`; also this node's identity on the bus")
		fs.Var((*grantFlag)(&c.Bus.Authorization.Publish), "allow-pub", "`topic=KEY,...`: only these identities (public user nkeys, or *) may publish on topic (* for every topic); repeatable")
		fs.Var((*grantFlag)(&c.Bus.Authorization.Subscribe), "allow-sub", "`topic=KEY,...`: only these identities may subscribe to topic; repeatable")
	}
	if cmd == "pub" || cmd == "demo" {
		fs.IntVar(&c.Ring.Journal, "journal", c.Ring.Journal, "`slots` of the journal the topic's home keeps for subscribers to recover losses from (a power of two; 0: none)")
		fs.Float64Var(&c.Pub.Rate, "rate", c.Pub.Rate, "ticks per `second`; 0 publishes as fast as possible")
		fs.IntVar(&c.Pub.Instruments, "instruments", c.Pub.Instruments, "`number` of synthetic instruments")
		fs.IntVar(&c.Pub.Batch, "batch", c.Pub.Batch, "ticks per `batch` (PublishBatch when > 1)")
		fs.StringVar(&c.Pub.Venue, "venue", c.Pub.Venue, "`MIC` stamped on every tick")
		fs.Uint64Var(&c.Pub.Seed, "seed", c.Pub.Seed, "random walk `seed`")
	}
	switch cmd {
	case "pub":
		fs.DurationVar(&c.Pub.Duration, "duration", c.Pub.Duration, "how `long` to publish; 0 until interrupted")
		fs.DurationVar(&c.Pub.Wait, "wait", c.Pub.Wait, "wait up to this `long` for --wait-subs subscribers before publishing (0: publish at once)")
		fs.IntVar(&c.Pub.WaitSubscribers, "wait-subs", c.Pub.WaitSubscribers, "`number` of subscribers --wait waits for")
		fs.DurationVar(&c.Pub.Timeout, "publish-timeout", c.Pub.Timeout, "how `long` a publish waits for the home to answer a claim (then it fails over, or reconnects to the same home) or for room at reliable subscribers (pub.timeout; 0: 1s)")
		fs.Uint64Var(&c.Pub.FirstInstrument, "first-instrument", c.Pub.FirstInstrument, "lowest instrument `id`")
		fs.StringVar(&c.Feed.Kind, "feed", c.Feed.Kind, "what to publish: `random` (the synthetic walk), itch (a TotalView-ITCH 5.0 file) or csv")
		fs.StringVar(&c.Feed.File, "file", c.Feed.File, "the itch or csv `file` to replay")
		fs.Float64Var(&c.Feed.Speed, "speed", c.Feed.Speed, "replay `speed`: 0 as fast as flow control allows, 1 the original pace, N N times faster")
		fs.StringVar(&c.Feed.Date, "date", c.Feed.Date, "an ITCH file's trading `day`, YYYY-MM-DD (default from a MMDDYYYY file name)")
		fs.StringVar(&c.Feed.Line, "line", c.Feed.Line, "`A` or B: one of two redundant lines replaying the same file onto a fresh topic, arbitrated by sequence")
		fs.DurationVar(&c.Feed.LineWindow, "line-window", c.Feed.LineWindow, "how `long` a line ahead of the other waits for it to fill a sequence (default 1ms)")
		fs.BoolVar(&c.Feed.Progress, "progress", c.Feed.Progress, "draw a progress bar on stderr while replaying a file over 1 MiB")
	case "sub":
		fs.BoolVar(&c.Sub.Print, "print", c.Sub.Print, "print every tick")
		fs.DurationVar(&c.Sub.Interval, "interval", c.Sub.Interval, "`time` between status lines")
		fs.DurationVar(&c.Sub.Duration, "duration", c.Sub.Duration, "how `long` to run; 0 until interrupted")
		fs.StringVar(&c.Ring.Mode, "mode", c.Ring.Mode, "flow control `mode`: lossy (never slow the publisher; losses reported) or reliable (publishers wait for room)")
		fs.StringVar(&c.Sub.SeqLog, "seq-log", c.Sub.SeqLog, "(debugging) write every delivered sequence to `file`, one per line")
	case "demo":
		fs.DurationVar(&c.Demo.Duration, "duration", c.Demo.Duration, "how `long` the publisher runs")
		fs.IntVar(&c.Demo.Subscribers, "subscribers", c.Demo.Subscribers, "`number` of subscriber processes")
		fs.StringVar(&c.Demo.Dash, "dash", c.Demo.Dash, `dashboard listen `+"`address`"+`; "" turns it off`)
	}
}

// grantFlag is a repeatable topic=key,key flag; each Set adds a topic.
type grantFlag map[string][]string

func (g *grantFlag) String() string {
	if g == nil || *g == nil {
		return ""
	}
	var parts []string
	for t, ids := range *g {
		parts = append(parts, t+"="+strings.Join(ids, ","))
	}
	return strings.Join(parts, " ")
}

func (g *grantFlag) Set(s string) error {
	topic, ids, ok := strings.Cut(s, "=")
	if !ok || topic == "" || ids == "" {
		return fmt.Errorf("%q: want topic=KEY[,KEY...]", s)
	}
	if *g == nil {
		*g = map[string][]string{}
	}
	for _, id := range strings.Split(ids, ",") {
		if id = strings.TrimSpace(id); id != "" {
			(*g)[topic] = append((*g)[topic], id)
		}
	}
	return nil
}

// urlList is a comma-separated list flag; each Set replaces the list.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(s string) error {
	*u = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*u = append(*u, p)
		}
	}
	return nil
}

// Parse parses args with fs; if that names a --config file (in *file), it
// calls reload (which must reset the flag-bound values to defaults and
// decode the file onto them) and parses args again, so that flags override
// the file and the file overrides the defaults.
//
// A parse error is returned, not printed with the whole usage; --help
// prints the usage (fs.Usage) and returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string, file *string, reload func(path string) error) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := parse(fs, args, file, reload)
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
	}
	return err
}

func parse(fs *flag.FlagSet, args []string, file *string, reload func(path string) error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return nil
	}
	path := *file
	if err := reload(path); err != nil {
		return err
	}
	*file = path
	return fs.Parse(args)
}

// Load builds the configuration of command cmd from defaults, the --config
// file and args, and validates it. --help prints usage to out and returns
// flag.ErrHelp.
func Load(cmd, synopsis string, args []string, out io.Writer) (*Config, error) {
	c := Default()
	var file string
	fs := flag.NewFlagSet("tickbus "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	RegisterCommon(fs, &file, &c.Log)
	c.RegisterFlags(fs, cmd)
	fs.Usage = func() { Usage(fs, cmd, synopsis) }
	err := Parse(fs, args, &file, func(path string) error {
		d := Default()
		if err := DecodeFile(path, &d); err != nil {
			return err
		}
		c = d
		return nil
	})
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("tickbus %s: %w", cmd, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("tickbus %s: unexpected argument %q (see tickbus %s --help)", cmd, fs.Arg(0), cmd)
	}
	if err := c.Validate(cmd); err != nil {
		if file != "" {
			return nil, fmt.Errorf("tickbus %s: %s: %w", cmd, file, err)
		}
		return nil, fmt.Errorf("tickbus %s: %w", cmd, err)
	}
	return &c, nil
}

// Usage prints a command's synopsis and every flag with its help and
// default.
func Usage(fs *flag.FlagSet, cmd, synopsis string) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: tickbus %s [flags]\n\n%s\n\nFlags (each also a key of the --config file; flags win):\n", cmd, strings.TrimSpace(synopsis))
	fs.PrintDefaults()
}
