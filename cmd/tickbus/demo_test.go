package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// As a new user would: build the command and run the demo.
func TestDemo_EverySubscriberGetsEveryTick_AndExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tickbus binary and runs three processes for several seconds; skipped with -short")
	}
	bin, _ := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := start(t, ctx, "demo", bin, nil, "demo", "--duration", "3s", "--rate", "5000", "--idle", "yield")
	code := p.wait(80 * time.Second)
	out := p.out()
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, p.errOut())

	pub := regexp.MustCompile(`published (\d+) ticks \(seq 1\.\.(\d+)\)`).FindStringSubmatch(out)
	require.NotNil(t, pub, out)
	assert.Equal(t, pub[1], pub[2])
	rows := regexp.MustCompile(`(?m)^(sub-\d)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9a-f]{16})$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 2, out)
	for _, r := range rows {
		assert.Equal(t, pub[1], r[2], "%s received every published tick", r[1])
		assert.Equal(t, "0", r[3], "%s gaps", r[1])
		assert.Equal(t, "0", r[4], "%s overruns", r[1])
		for _, lat := range r[5:9] {
			assert.Regexp(t, `^[0-9.]+(ns|µs|ms|s)$`, lat)
		}
	}
	assert.Equal(t, rows[0][9], rows[1][9], "both saw the same order")
	assert.Contains(t, out, "dashboard: http://127.0.0.1:")
	assert.Contains(t, out, "tickbus sub  --nats nats://127.0.0.1:4222 --topic demo")
	assert.Contains(t, out, "tickbus pub  --nats")
	assert.Contains(t, out, "OK: every subscriber received all")
	assert.False(t, strings.Contains(out, "FAIL"))
}

func TestCLI_HelpAndBadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tickbus binary; skipped with -short (internal/config covers the same checks)")
	}
	bin, _ := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, cmd := range []string{"demo", "pub", "sub", "dash", "stat", "bench"} {
		p := start(t, ctx, cmd+" --help", bin, nil, cmd, "--help")
		assert.Equal(t, 0, p.wait(20*time.Second), cmd)
		help := p.errOut()
		for _, f := range []string{"-config", "-log-level", "-log-format"} {
			assert.Contains(t, help, f, "%s --help lists %s", cmd, f)
		}
	}
	p := start(t, ctx, "unknown", bin, nil, "frobnicate")
	assert.Equal(t, 2, p.wait(20*time.Second))
	assert.Contains(t, p.errOut(), `unknown command "frobnicate"`)

	p = start(t, ctx, "bad flag", bin, nil, "pub", "--rate", "-5")
	assert.Equal(t, 2, p.wait(20*time.Second))
	assert.Contains(t, p.errOut(), "pub.rate = -5")

	p = start(t, ctx, "bad publish timeout", bin, nil, "pub", "--publish-timeout", "-1s")
	assert.Equal(t, 2, p.wait(20*time.Second))
	assert.Contains(t, p.errOut(), "pub.timeout = -1s: want 0 (the default, 1s) or a positive duration")
	p = start(t, ctx, "pub --help", bin, nil, "pub", "--help")
	assert.Equal(t, 0, p.wait(20*time.Second))
	assert.Contains(t, p.errOut(), "-publish-timeout", "pub --help lists --publish-timeout")

	p = start(t, ctx, "bad file", bin, nil, "sub", "--config", "testdata/does-not-exist.yaml")
	assert.Equal(t, 2, p.wait(20*time.Second))
	assert.Contains(t, p.errOut(), "does-not-exist.yaml")

	p = start(t, ctx, "example config", bin, nil, "demo", "--config", "../../configs/demo.yaml", "--help")
	assert.Equal(t, 0, p.wait(20*time.Second))
}
