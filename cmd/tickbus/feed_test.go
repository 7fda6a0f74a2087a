package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/feed/itch"
	"github.com/tickbus/tickbus/internal/itchgen"
)

// Two `tickbus pub --feed itch --line A|B` processes replay one generated
// ITCH file onto md.nasdaq.itch; `tickbus sub --topic 'md.nasdaq.>'
// --print` prints every tick once, each line the topic and then SEQ VENUE
// #INSTRUMENT KIND PRICE x SIZE xseq=N, equal to an independent model of
// the file.
func TestCLI_ITCHReplay_ABLines_WildcardSubscriberPrintsEveryTickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and three tickbus processes; skipped with -short")
	}
	tickbus, natsBin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	port := freePort(t)
	startNATS(t, ctx, natsBin, port)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	raw, events := itchgen.Generate(itchgen.Config{Seed: 77, Messages: 5000, Stocks: 4})
	path := filepath.Join(t.TempDir(), "12012026.NASDAQ_ITCH50") // the day from the name
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	want := itchgen.Expect(events, itch.Midnight(day))
	var lines []string
	for i := range want {
		want[i].Venue = itch.Venue
		lines = append(lines, "md.nasdaq.itch "+strconv.Itoa(i+1)+" "+string(want[i].AppendText(nil)))
	}

	common := []string{"--nats", url, "--idle", "yield", "--json", "--log-level", "warn", "--lease-ttl", testLease}
	sub := start(t, ctx, "sub", tickbus, nil, append([]string{"sub", "--node-id", "sub", "--topic", "md.nasdaq.>", "--print",
		"--mode", "reliable", "--interval", "200ms"}, common...)...)
	sub.waitEvent("ready", 30*time.Second)
	pub := func(line string) *proc {
		return start(t, ctx, "line-"+line, tickbus, nil, append([]string{"pub", "--node-id", "line-" + line, "--topic", "md.nasdaq.itch",
			"--feed", "itch", "--file", path, "--line", line, "--line-window", "10s", "--wait", "60s", "--wait-subs", "1"}, common...)...)
	}
	a, b := pub("A"), pub("B")
	require.Equal(t, 0, a.wait(60*time.Second), a.errOut())
	require.Equal(t, 0, b.wait(60*time.Second), b.errOut())
	ea, eb := a.waitEvent("published", time.Second), b.waitEvent("published", time.Second)
	assert.Equal(t, uint64(len(want)), num(ea, "published")+num(eb, "published"), "each tick published by one line")
	assert.Equal(t, uint64(len(want)), num(ea, "lost_arbitration")+num(eb, "lost_arbitration"), "and dropped by the other")
	assert.Equal(t, uint64(5000), num(ea, "messages"))

	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && strings.Count(sub.out(), "md.nasdaq.itch ") < len(want) {
		time.Sleep(20 * time.Millisecond)
	}
	sub.signal(15)
	require.Equal(t, 0, sub.wait(30*time.Second), sub.errOut())
	sum := sub.waitEvent("summary", time.Second)
	assert.Equal(t, uint64(len(want)), num(sum, "received"))
	assert.Zero(t, num(sum, "lost"))
	var got []string
	for _, l := range strings.Split(sub.out(), "\n") {
		if strings.HasPrefix(l, "md.nasdaq.itch ") {
			got = append(got, l)
		}
	}
	require.Len(t, got, len(want))
	for i := range lines {
		if got[i] != lines[i] {
			require.Equal(t, lines[i], got[i], "line %d", i)
		}
	}
}

func TestCLI_ITCHReplay_TruncatedFile_NamesOffsetAndMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tickbus; skipped with -short")
	}
	tickbus, _ := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	raw, _ := itchgen.Generate(itchgen.Config{Seed: 1, Messages: 100, Stocks: 2})
	path := filepath.Join(t.TempDir(), "feed.itch")
	require.NoError(t, os.WriteFile(path, raw[:len(raw)-3], 0o600))
	p := start(t, ctx, "pub", tickbus, nil, "pub", "--topic", "md.cut", "--feed", "itch", "--file", path, "--date", "2026-12-01",
		"--log-level", "warn")
	assert.Equal(t, 1, p.wait(30*time.Second))
	assert.Contains(t, p.errOut(), "itch: message 100 at byte offset")
	assert.Contains(t, p.errOut(), "truncated")

	p = start(t, ctx, "pub", tickbus, nil, "pub", "--topic", "md.cut", "--feed", "itch", "--file", path, "--log-level", "warn")
	assert.Equal(t, 2, p.wait(30*time.Second))
	assert.Contains(t, p.errOut(), `feed.date = ""`)
}

// `tickbus pub --feed csv` replays a CSV file; a subscriber of the one
// topic prints SEQ VENUE #INSTRUMENT KIND PRICE x SIZE xseq=N, no topic.
func TestCLI_CSVReplay_PrintsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and two tickbus processes; skipped with -short")
	}
	tickbus, natsBin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	port := freePort(t)
	startNATS(t, ctx, natsBin, port)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	csvFile := "time,instrument,kind,price,size,exchange_seq\n" +
		"2026-12-01T09:30:00-05:00,7,trade,101.25,300,1\n" +
		"2026-12-01T09:30:00-05:00,7,bid,101.2,500,1\n" +
		"2026-12-01T09:30:01-05:00,8,ask,99.5,100,2\n"
	path := filepath.Join(t.TempDir(), "ticks.csv")
	require.NoError(t, os.WriteFile(path, []byte(csvFile), 0o600))
	common := []string{"--nats", url, "--idle", "yield", "--json", "--log-level", "warn", "--topic", "md.csv.test", "--lease-ttl", testLease}
	sub := start(t, ctx, "sub", tickbus, nil, append([]string{"sub", "--print", "--mode", "reliable"}, common...)...)
	sub.waitEvent("ready", 30*time.Second)
	pub := start(t, ctx, "pub", tickbus, nil, append([]string{"pub", "--feed", "csv", "--file", path, "--venue", "XNAS",
		"--wait", "30s", "--wait-subs", "1"}, common...)...)
	require.Equal(t, 0, pub.wait(60*time.Second), pub.errOut())
	assert.Equal(t, uint64(3), num(pub.waitEvent("published", time.Second), "published"))
	want := []string{
		"1 XNAS #7 trade 101.25 x 300 xseq=1",
		"2 XNAS #7 bid 101.20 x 500 xseq=1 flags=0x2",
		"3 XNAS #8 ask 99.50 x 100 xseq=2 flags=0x2",
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(sub.out(), want[2]) {
		time.Sleep(20 * time.Millisecond)
	}
	sub.signal(15)
	require.Equal(t, 0, sub.wait(30*time.Second), sub.errOut())
	var got []string
	for _, l := range strings.Split(sub.out(), "\n") {
		if l != "" && l[0] >= '0' && l[0] <= '9' {
			got = append(got, l)
		}
	}
	assert.Equal(t, want, got)
}
