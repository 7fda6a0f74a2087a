package dash

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// RunStat shows each series with the counters and percentiles sent.
func TestRunStat_PrintsEverySeriesEachPeriod(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- RunStat(ctx, StatConfig{NATS: NATSConfig{URL: ns.ClientURL()}, Every: 100 * time.Millisecond, Count: 0}, &out)
	}()
	a := newFeed("md.AAPL", "engine-1", 31, 2000)
	b := newFeed("md.MSFT", "engine-2", 32, 50000)
	b.totals.Tail = 6 // as a closing subscriber's last message says
	c := newFeed("md.TSLA", "engine-3", 33, 3000)
	c.totals.TailUnknown = true // a Close that could name no tail
	// Wait for the subscription, then send until a screen shows both.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "engine-2") || !strings.Contains(out.String(), "engine-1") || !strings.Contains(out.String(), "engine-3") {
		require.True(t, time.Now().Before(deadline), "no screen with every series:\n%s", out.String())
		a.interval(t, nc, 1000, 3, 0)
		b.interval(t, nc, 500, 0, 1)
		c.interval(t, nc, 200, 0, 0)
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(250 * time.Millisecond) // one more screen with the latest figures
	cancel()
	require.NoError(t, <-errc)

	screens := strings.Split(strings.TrimSpace(out.String()), "\n\n")
	last := screens[len(screens)-1]
	assert.Contains(t, last, "tickbus stat: tickbus.stats.>")
	assert.Contains(t, last, "3 series")
	lines := strings.Split(last, "\n")
	require.GreaterOrEqual(t, len(lines), 4, last)
	assert.Equal(t, []string{"TOPIC", "SUBSCRIBER", "HOST", "PROVIDER", "RATE/s", "RECEIVED", "GAPS", "OVERRUNS", "TAIL", "P50", "P99", "P99.9", "MAX", "AGE"},
		strings.Fields(lines[1]))
	require.GreaterOrEqual(t, len(lines), 5, last)
	for i, f := range []*feed{a, b, c} {
		fields := strings.Fields(lines[2+i])
		require.Len(t, fields, 14, lines[2+i])
		assert.Equal(t, f.meta.Topic, fields[0])
		assert.Equal(t, f.meta.Subscriber, fields[1])
		assert.Equal(t, f.meta.Host, fields[2])
		assert.Equal(t, "shm", fields[3])
		assert.Equal(t, itoa(f.totals.Received), fields[5])
		assert.Equal(t, itoa(f.totals.Gaps), fields[6])
		assert.Equal(t, itoa(f.totals.Overruns), fields[7])
		if f.totals.TailUnknown {
			assert.Equal(t, "?", fields[8], "a tail that could not be named shows as ?, not 0")
		} else {
			assert.Equal(t, itoa(f.totals.Tail), fields[8])
		}
		assert.Equal(t, FormatNs(f.last().ValueAtQuantile(50)), fields[9])
		assert.Equal(t, FormatNs(f.last().ValueAtQuantile(99)), fields[10])
		assert.Equal(t, FormatNs(f.last().ValueAtQuantile(99.9)), fields[11])
		assert.Equal(t, FormatNs(f.last().Max()), fields[12])
	}
}

func TestRunStat_StopsAfterCount(t *testing.T) {
	ns := startNATS(t)
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, RunStat(ctx, StatConfig{NATS: NATSConfig{URL: ns.ClientURL()}, Every: 20 * time.Millisecond, Count: 3, Clear: true}, &out))
	assert.Equal(t, 3, strings.Count(out.String(), "\x1b[H\x1b[2J"))
	assert.Equal(t, 3, strings.Count(out.String(), "0 series"))
}

func TestRunStat_RejectsBadConfig(t *testing.T) {
	err := RunStat(context.Background(), StatConfig{Every: -time.Second}, &syncBuffer{})
	assert.ErrorIs(t, err, ErrConfig)
}

func TestFormatNs_ThreeSignificantDigits(t *testing.T) {
	for ns, want := range map[int64]string{0: "0ns", 950: "950ns", 1000: "1.00µs", 12345: "12.3µs", 456789: "457µs",
		4_560_000: "4.56ms", 1_200_000_000: "1.20s", 10_000_000_000: "10.0s"} {
		assert.Equal(t, want, FormatNs(ns), "%d", ns)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
