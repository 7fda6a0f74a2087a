package bench

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestConfig_RegisterFlags_ParsesEveryFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"--duration", "2s", "--tp-duration", "300ms", "--rate", "5000", "--size", "128", "--batch", "32",
		"--cases", "nats, floor", "--ring-mode", "lossy", "--ring-slots", "65536", "--claim", "faa", "--cpus", "0,1", "--idle", "yield", "--pingpong", "--scaling=false",
		"--quick", "--json", "r.json", "--out", "dir",
	}))
	assert.Equal(t, 2*time.Second, cfg.Duration)
	assert.Equal(t, 300*time.Millisecond, cfg.ThroughputDuration)
	assert.Equal(t, 5000, cfg.Rate)
	assert.Equal(t, 128, cfg.Size)
	assert.Equal(t, 32, cfg.Batch)
	assert.Equal(t, []string{"nats", "floor"}, cfg.Cases)
	assert.Equal(t, []string{CaseNATS, CaseFloor}, cfg.selected(), "table order, not flag order")
	assert.Equal(t, []int{0, 1}, cfg.CPUs)
	assert.Equal(t, "yield", cfg.Idle)
	assert.Equal(t, "lossy", cfg.RingMode)
	assert.Equal(t, 65536, cfg.RingSlots)
	assert.Equal(t, "faa", cfg.Claim)
	assert.True(t, cfg.PingPong)
	assert.False(t, cfg.Scaling)
	assert.True(t, cfg.Quick)
	assert.Equal(t, "r.json", cfg.JSON)
	assert.Equal(t, "dir", cfg.Out)
	require.NoError(t, cfg.Validate())
}

func TestConfig_RegisterFlags_RejectsBadCPUList(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	cfg.RegisterFlags(fs)
	assert.Error(t, fs.Parse([]string{"--cpus", "0,x"}))
}

func TestConfig_Validate_NamesTheBadKey(t *testing.T) {
	for key, mut := range map[string]func(*Config){
		"duration":    func(c *Config) { c.Duration = 0 },
		"tp-duration": func(c *Config) { c.ThroughputDuration = -time.Second },
		"rate":        func(c *Config) { c.Rate = 0 },
		"size":        func(c *Config) { c.Size = MinSize - 1 },
		"batch":       func(c *Config) { c.Batch = 0 },
		"cases":       func(c *Config) { c.Cases = []string{"zeromq"} },
		"cpus":        func(c *Config) { c.CPUs = []int{-1} },
		"idle":        func(c *Config) { c.Idle = "nap" },
		"ring-mode":   func(c *Config) { c.RingMode = "sometimes" },
		"ring-slots":  func(c *Config) { c.RingSlots = 5000 },
		"trace":       func(c *Config) { c.Trace = true }, // no --out
		"claim":       func(c *Config) { c.Claim = "grab" },
	} {
		cfg := DefaultConfig()
		mut(&cfg)
		err := cfg.Validate()
		assert.ErrorIs(t, err, ErrInvalidConfig, key)
		assert.ErrorContains(t, err, key+" =", key)
	}
}

func TestConfig_Default_IsValid_AndQuickIsShorter(t *testing.T) {
	cfg := DefaultConfig()
	require.NoError(t, cfg.Validate())
	q := cfg.quick()
	require.NoError(t, q.Validate())
	assert.Less(t, q.Duration, cfg.Duration)
	assert.Less(t, q.ThroughputDuration, cfg.ThroughputDuration)
}

func TestRun_BadConfig_FailsAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Rate = -1
	cfg.JSON = filepath.Join(dir, "r.json")
	cfg.Out = filepath.Join(dir, "out")
	var out bytes.Buffer
	err := Run(context.Background(), cfg, &out)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Empty(t, out.String())
	_, err = os.Stat(cfg.JSON)
	assert.True(t, os.IsNotExist(err))
	_, err = os.Stat(cfg.Out)
	assert.True(t, os.IsNotExist(err))
}

func TestConfig_YAMLKeysAreTheFlagNames(t *testing.T) {
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(strings.NewReader("duration: 2s\ntp-duration: 300ms\nrate: 5000\ncases: [nats, chan]\ncpus: [0, 1]\nring-mode: lossy\nring-slots: 262144\nclaim: faa\npingpong: true\npprof: true\ntrace: true\nout: d\n"))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&cfg))
	assert.Equal(t, 2*time.Second, cfg.Duration)
	assert.Equal(t, 300*time.Millisecond, cfg.ThroughputDuration)
	assert.Equal(t, 5000, cfg.Rate)
	assert.Equal(t, []string{"nats", "chan"}, cfg.Cases)
	assert.Equal(t, []int{0, 1}, cfg.CPUs)
	assert.Equal(t, "lossy", cfg.RingMode)
	assert.Equal(t, 262144, cfg.RingSlots)
	assert.Equal(t, "faa", cfg.Claim)
	assert.True(t, cfg.PingPong)
	assert.True(t, cfg.Profile)
	assert.True(t, cfg.Trace)
	require.NoError(t, cfg.Validate())

	bad := yaml.NewDecoder(strings.NewReader("ringmode: lossy\n"))
	bad.KnownFields(true)
	assert.Error(t, bad.Decode(&cfg), "only the flag spelling is a key")
}

// tickbus-tcp-remotehome runs only when named, after the table's cases.
func TestConfig_ExtraCase_OnlyWhenNamed(t *testing.T) {
	cfg := DefaultConfig()
	assert.NotContains(t, cfg.selected(), CaseTickbusTCPRemoteHome)
	cfg.Cases = []string{CaseTickbusTCPRemoteHome, CaseTickbusTCP}
	require.NoError(t, cfg.Validate())
	assert.Equal(t, []string{CaseTickbusTCP, CaseTickbusTCPRemoteHome}, cfg.selected())
}

func TestConfig_Validate_RingSlots(t *testing.T) {
	for _, n := range []int{0, -4096, 2048, 4097, 3 << 12, 1 << 25} {
		cfg := DefaultConfig()
		cfg.RingSlots = n
		assert.ErrorContains(t, cfg.Validate(), "ring-slots =", n)
	}
	for _, n := range []int{4096, 1 << 16, 1 << 24} {
		cfg := DefaultConfig()
		cfg.RingSlots = n
		assert.NoError(t, cfg.Validate(), n)
	}
}
