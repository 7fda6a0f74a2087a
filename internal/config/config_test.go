package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestConfigs_EveryExampleFileLoadsAndValidates(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "configs/ has example files")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c := Default()
			require.NoError(t, DecodeFile(f, &c))
			cmd := strings.TrimSuffix(filepath.Base(f), ".yaml")
			require.Contains(t, []string{"demo", "pub", "sub"}, cmd, "name each example after its command")
			assert.NoError(t, c.Validate(cmd))
			// The file is not silently empty: decoded onto zero values,
			// it sets the sections its command reads.
			var z Config
			require.NoError(t, DecodeFile(f, &z))
			assert.NotEmpty(t, z.Topic)
			assert.NotZero(t, z.Ring.Slots)
		})
	}
}

func TestDecode_UnknownKey_NamesKeyLineAndKnownKeys(t *testing.T) {
	c := Default()
	before := c
	err := Decode([]byte("topic: a\npub:\n  rate: 5\n  rat: 7\n"), &c)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"pub.rat"`)
	assert.Contains(t, err.Error(), "line 4")
	assert.Contains(t, err.Error(), "rate")
	assert.Equal(t, before, c, "nothing changed")

	err = Decode([]byte("colour: blue\n"), &c)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"colour"`)
	assert.Contains(t, err.Error(), "topic")
}

func TestDecode_BadValue_NamesKeyValueAndExpectation(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"number":   {"pub:\n  rate: fast\n", `pub.rate = "fast": want a number`},
		"duration": {"pub:\n  duration: 5 minutes\n", `pub.duration = "5 minutes": want a duration`},
		"int":      {"ring:\n  slots: 1.5\n", `ring.slots = "1.5": want a whole number`},
		"unsigned": {"pub:\n  seed: -3\n", `pub.seed = "-3": want a whole number >= 0`},
		"bool":     {"sub:\n  print: perhaps\n", `sub.print = "perhaps": want true or false`},
		"mapping":  {"pub: 5\n", `pub = "5": want a mapping of`},
		"list":     {"bus:\n  nats: {a: b}\n", `bus.nats = a mapping: want a list of a string`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			err := Decode([]byte(tc.body), &c)
			require.ErrorIs(t, err, ErrBadValue)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, Default(), c, "nothing changed")
		})
	}
}

func TestDecode_KeepsDefaultsForAbsentKeysAndAcceptsEmptyFiles(t *testing.T) {
	c := Default()
	require.NoError(t, Decode([]byte("pub:\n  rate: 5\n"), &c))
	want := Default()
	want.Pub.Rate = 5
	assert.Equal(t, want, c)

	for _, empty := range []string{"", "# only a comment\n", "---\n"} {
		c := Default()
		require.NoError(t, Decode([]byte(empty), &c), "%q", empty)
		assert.Equal(t, Default(), c)
	}
}

func TestDecode_RejectsBrokenYAMLAndSeveralDocuments(t *testing.T) {
	c := Default()
	err := Decode([]byte("pub: [\n"), &c)
	assert.ErrorIs(t, err, ErrFile)
	err = Decode([]byte("topic: a\n---\ntopic: b\n"), &c)
	assert.ErrorIs(t, err, ErrFile)
	assert.Equal(t, Default(), c)
}

func TestDecodeFile_MissingFileIsAClearError(t *testing.T) {
	c := Default()
	err := DecodeFile(filepath.Join(t.TempDir(), "nope.yaml"), &c)
	require.ErrorIs(t, err, ErrFile)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestValidate_NamesKeyValueAndExpectation(t *testing.T) {
	cases := map[string]struct {
		cmd    string
		mutate func(*Config)
		want   string
	}{
		"slots":        {"sub", func(c *Config) { c.Ring.Slots = 1000 }, "ring.slots = 1000: want a power of two"},
		"slot size":    {"sub", func(c *Config) { c.Ring.SlotSize = 100 }, "ring.slot_size = 100: want a multiple of 32"},
		"slot size 80": {"sub", func(c *Config) { c.Ring.SlotSize = 80 }, "ring.slot_size = 80: want a multiple of 32"},
		"journal":      {"pub", func(c *Config) { c.Ring.Journal = 1000 }, "ring.journal = 1000: want 0 (no journal) or a power of two"},
		"tiny slot":    {"sub", func(c *Config) { c.Ring.SlotSize = 64 }, "ring.slot_size = 64: want room for a 56-byte tick"},
		"mode":         {"sub", func(c *Config) { c.Ring.Mode = "fast" }, `ring.mode = "fast": want lossy (never slow the publisher) or reliable`},
		"wait subs":    {"pub", func(c *Config) { c.Pub.WaitSubscribers = -1 }, "pub.wait_subscribers = -1"},
		"pub timeout":  {"pub", func(c *Config) { c.Pub.Timeout = -time.Second }, "pub.timeout = -1s: want 0 (the default, 1s) or a positive duration"},
		"idle":         {"pub", func(c *Config) { c.Idle = "nap" }, `idle = "nap": want adaptive, spin, yield or backoff`},
		"topic":        {"pub", func(c *Config) { c.Topic = "a..b" }, `topic = "a..b": want up to 8 tokens`},
		"topic depth":  {"pub", func(c *Config) { c.Topic = "a.b.c.d.e.f.g.h.i" }, `topic = "a.b.c.d.e.f.g.h.i": want up to 8 tokens`},
		"pub pattern":  {"pub", func(c *Config) { c.Topic = "md.>" }, `topic = "md.>": want up to 8 tokens`},
		"sub pattern":  {"sub", func(c *Config) { c.Topic = "md.>.x" }, `topic = "md.>.x": want up to 8 dot-separated tokens`},
		"feed kind":    {"pub", func(c *Config) { c.Feed.Kind = "fix" }, `feed.kind = "fix": want random, itch or csv`},
		"feed file":    {"pub", func(c *Config) { c.Feed.Kind = "itch" }, `feed.file = "": want the path of the itch file`},
		"feed gone":    {"pub", func(c *Config) { c.Feed.Kind, c.Feed.File = "csv", "/nonexistent.csv" }, `feed.file = "/nonexistent.csv": want a readable csv file`},
		"feed speed":   {"pub", func(c *Config) { c.Feed.Kind, c.Feed.File, c.Feed.Speed = "csv", "config.go", -2 }, `feed.speed = -2: want 0`},
		"feed line":    {"pub", func(c *Config) { c.Feed.Kind, c.Feed.File, c.Feed.Line = "csv", "config.go", "C" }, `feed.line = "C": want A or B`},
		"random line":  {"pub", func(c *Config) { c.Feed.Line = "A" }, `feed.line = "A": want "" with feed.kind random`},
		"itch date":    {"pub", func(c *Config) { c.Feed.Kind, c.Feed.File = "itch", "config.go" }, `feed.date = "": want the file's trading day`},
		"bad date":     {"pub", func(c *Config) { c.Feed.Kind, c.Feed.File, c.Feed.Date = "itch", "config.go", "1/30/2019" }, `feed.date = "1/30/2019": want a date YYYY-MM-DD`},
		"empty topic":  {"pub", func(c *Config) { c.Topic = "" }, `topic = "": want 1..128`},
		"topic chars":  {"pub", func(c *Config) { c.Topic = "a b" }, `topic = "a b"`},
		"rate":         {"pub", func(c *Config) { c.Pub.Rate = -1 }, "pub.rate = -1: want 0"},
		"batch":        {"pub", func(c *Config) { c.Pub.Batch = 0 }, "pub.batch = 0"},
		"instruments":  {"pub", func(c *Config) { c.Pub.Instruments = 0 }, "pub.instruments = 0: want 1..1048576"},
		"venue":        {"pub", func(c *Config) { c.Pub.Venue = "nyse" }, `pub.venue = "nyse": want a 4-character MIC`},
		"tick size":    {"pub", func(c *Config) { c.Pub.TickSize = 0 }, "pub.tick_size = 0"},
		"ratio":        {"pub", func(c *Config) { c.Pub.TradeRatio = 2 }, "pub.trade_ratio = 2"},
		"interval":     {"sub", func(c *Config) { c.Sub.Interval = time.Millisecond }, "sub.interval = 1ms: want at least 10ms"},
		"provider":     {"sub", func(c *Config) { c.Bus.Provider = "udp" }, `bus.provider = "udp"`},
		"heartbeat":    {"sub", func(c *Config) { c.Bus.HeartbeatInterval = time.Second; c.Bus.HeartbeatTimeout = time.Second }, "bus.heartbeat_timeout = 1s: want 0 (default) or at least twice"},
		"lease":        {"pub", func(c *Config) { c.Bus.LeaseTTL = time.Millisecond }, "bus.lease_ttl = 1ms: want 0 (default) or at least 100ms"},
		"unheard":      {"sub", func(c *Config) { c.Bus.UnheardHold = 10 * time.Millisecond }, "bus.unheard_hold = 10ms: want 0 (default), at least 50ms"},
		"tls pair":     {"sub", func(c *Config) { c.Bus.CertFile = "x.pem" }, `bus.cert_file = "x.pem"`},
		"log level":    {"sub", func(c *Config) { c.Log.Level = "loud" }, `log.level = "loud": want trace`},
		"log format":   {"sub", func(c *Config) { c.Log.Format = "xml" }, `log.format = "xml": want json or console`},
		"demo dur":     {"demo", func(c *Config) { c.Demo.Duration = 0 }, "demo.duration = 0s"},
		"demo subs":    {"demo", func(c *Config) { c.Demo.Subscribers = 0 }, "demo.subscribers = 0: want 1..16"},
		"demo rate":    {"demo", func(c *Config) { c.Pub.Rate = 0 }, "pub.rate = 0: want a positive rate for the demo"},
		"nats url":     {"sub", func(c *Config) { c.Bus.NATS = []string{"nats://a b"} }, "bus.nats"},
		// issue 10: 16,777,216 slots of 32 KiB (512 GiB) passed and stalled the host
		"ring 512GiB": {"sub", func(c *Config) { c.Ring.Slots, c.Ring.SlotSize = 1<<24, 32<<10 },
			"ring.slots = 16777216: want ring.slots x ring.slot_size (16777216 x 32768 = 512 GiB) at most 4 GiB, the documented maximum"},
		"ring 8GiB": {"sub", func(c *Config) { c.Ring.Slots, c.Ring.SlotSize = 1<<23, 1<<10 }, "at most 4 GiB"},
		"journal 16TiB": {"pub", func(c *Config) { c.Ring.Slots, c.Ring.Journal, c.Ring.SlotSize = 1024, 1<<24, 1<<20 },
			"ring.journal = 16777216: want ring.journal x ring.slot_size (16777216 x 1048576 = 16 TiB) at most 4 GiB"},
		"auth key": {"sub", func(c *Config) { c.Bus.Authorization.Publish = map[string][]string{"demo": {"alice"}} },
			`bus.authorization.publish.demo = "alice": want a public user nkey`},
		"auth topic": {"sub", func(c *Config) { c.Bus.Authorization.Subscribe = map[string][]string{"a..b": {"*"}} },
			`bus.authorization.subscribe.a..b = "a..b": want a topic`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			require.NoError(t, c.Validate(tc.cmd))
			tc.mutate(&c)
			err := c.Validate(tc.cmd)
			require.ErrorIs(t, err, ErrBadValue)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLoad_FlagsOverrideFileOverridesDefaults(t *testing.T) {
	p := writeFile(t, "topic: fromfile\npub:\n  rate: 123\n  instruments: 4\nlog:\n  level: warn\n")
	var out bytes.Buffer
	c, err := Load("pub", "x", []string{"--rate", "7", "--config", p, "--nats", "nats://h:1,nats://h:2"}, &out)
	require.NoError(t, err)
	assert.Equal(t, "fromfile", c.Topic, "file over default")
	assert.Equal(t, 7.0, c.Pub.Rate, "flag over file, even when given before --config")
	assert.Equal(t, 4, c.Pub.Instruments)
	assert.Equal(t, "warn", c.Log.Level)
	assert.Equal(t, []string{"nats://h:1", "nats://h:2"}, c.Bus.NATS)
	assert.Equal(t, Default().Pub.Seed, c.Pub.Seed, "default where neither says")
}

// bus.unheard_hold reaches the bus config from the file and from
// --unheard-hold, which wins.
func TestLoad_UnheardHold_FromFileAndFlag(t *testing.T) {
	p := writeFile(t, "bus:\n  unheard_hold: 5s\n")
	var out bytes.Buffer
	c, err := Load("sub", "x", []string{"--config", p}, &out)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, c.Bus.UnheardHold)
	c, err = Load("pub", "x", []string{"--config", p, "--unheard-hold", "-1s"}, &out)
	require.NoError(t, err)
	assert.Equal(t, -time.Second, c.Bus.UnheardHold)
}

func TestLoad_ErrorsNameTheFileAndKey(t *testing.T) {
	p := writeFile(t, "ring:\n  slots: 3\n")
	_, err := Load("sub", "x", []string{"--config", p}, &bytes.Buffer{})
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), p)
	assert.Contains(t, err.Error(), "ring.slots = 3")

	p = writeFile(t, "sub:\n  printt: true\n")
	_, err = Load("sub", "x", []string{"--config", p}, &bytes.Buffer{})
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"sub.printt"`)

	_, err = Load("sub", "x", []string{"--rate", "5"}, &bytes.Buffer{})
	require.Error(t, err, "pub flags are not sub flags")
	assert.Contains(t, err.Error(), "rate")

	_, err = Load("sub", "x", []string{"extra"}, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unexpected argument "extra"`)

	_, err = Load("pub", "x", []string{"--idle", "snooze"}, &bytes.Buffer{})
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), `idle = "snooze"`)
}

func TestLoad_Help_ExplainsEveryFlag(t *testing.T) {
	for _, cmd := range []string{"demo", "pub", "sub"} {
		t.Run(cmd, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Load(cmd, "what "+cmd+" does", []string{"--help"}, &out)
			require.True(t, errors.Is(err, flag.ErrHelp))
			help := out.String()
			assert.Contains(t, help, "what "+cmd+" does")
			c := Default()
			var file string
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			RegisterCommon(fs, &file, &c.Log)
			c.RegisterFlags(fs, cmd)
			n := 0
			fs.VisitAll(func(f *flag.Flag) {
				n++
				assert.Contains(t, help, "-"+f.Name, "flag %s listed", f.Name)
				assert.NotEmpty(t, f.Usage, "flag %s explained", f.Name)
			})
			assert.Greater(t, n, 8)
		})
	}
}

func TestLog_Logger_WritesTheChosenFormat(t *testing.T) {
	var buf bytes.Buffer
	l, err := Log{Level: "info", Format: "json"}.Logger(&buf)
	require.NoError(t, err)
	l.Info().Str("k", "v").Msg("hello")
	l.Debug().Msg("hidden")
	assert.Contains(t, buf.String(), `"message":"hello"`)
	assert.NotContains(t, buf.String(), "hidden")

	buf.Reset()
	l, err = Log{Level: "debug", Format: "console"}.Logger(&buf)
	require.NoError(t, err)
	l.Debug().Msg("shown")
	assert.Contains(t, buf.String(), "shown")
	assert.NotContains(t, buf.String(), "{")
}

// With no tuning flags, every poll loop gets the adaptive strategy: it
// spins while ticks come and parks when idle (rdma.Adaptive).
func TestDefault_IdleIsAdaptive(t *testing.T) {
	c := Default()
	assert.Equal(t, "adaptive", c.Idle)
	s, err := rdma.ParseIdle(c.Idle)
	require.NoError(t, err)
	assert.IsType(t, &rdma.Adaptive{}, s)
	for _, f := range []string{"demo.yaml", "pub.yaml", "sub.yaml"} {
		raw, err := os.ReadFile(filepath.Join("../../configs", f))
		require.NoError(t, err)
		assert.Contains(t, string(raw), "idle: adaptive", "%s shows the default", f)
	}
}
