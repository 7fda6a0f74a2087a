package main

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tickbus bench --cases cli-defaults runs sub and pub as separate processes
// with their defaults and prints what it measured. Figures are not checked
// (speed is the bench's to show); that they are there and add up is.
func TestBench_CLIDefaults_RunsSubAndPub_PrintsLatencyAndCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tickbus binary and runs a publisher and a subscriber process for seconds; skipped with -short")
	}
	bin, _ := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := start(t, ctx, "bench cli-defaults", bin, nil, "bench", "--cases", "cli-defaults", "--quick", "--rate", "2000")
	code := p.wait(110 * time.Second)
	out := p.out()
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, p.errOut())

	assert.Contains(t, out, "tickbus pub --rate 2000 --duration 1s")
	counts := regexp.MustCompile(`published (\d+), received (\d+), lost (\d+)`).FindStringSubmatch(out)
	require.NotNil(t, counts, out)
	pub, _ := strconv.Atoi(counts[1])
	recv, _ := strconv.Atoi(counts[2])
	assert.Positive(t, pub)
	assert.Positive(t, recv)
	assert.LessOrEqual(t, recv, pub, "received more than was published")
	assert.Regexp(t, `latency \(receive - intended send\): p50 [0-9.]+(ns|µs|ms|s) p99 \S+ p99\.9 \S+ max \S+`, out)
	cpu := regexp.MustCompile(`idle before the feed ([0-9.]+)%, receiving ([0-9.]+)%, idle after it ([0-9.]+)%; publisher ([0-9.]+)%`).FindStringSubmatch(out)
	require.NotNil(t, cpu, out)
	for _, s := range cpu[1:] {
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		assert.LessOrEqual(t, v, 100.0*2+1, "a share of one core, on at most a few cores") // a process of two busy threads may use two cores
	}
	assert.Regexp(t, `load average: \S+ \S+ \S+ before`, out)
	assert.NotContains(t, out, "round trip", "only the cli case ran")

	// Bad cases are still refused, with the name.
	q := start(t, ctx, "bench bad case", bin, nil, "bench", "--cases", "cli-defaults,nope")
	assert.Equal(t, 2, q.wait(30*time.Second))
	assert.Contains(t, q.errOut(), "nope")
}
