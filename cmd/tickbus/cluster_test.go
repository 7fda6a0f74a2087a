package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readSeqs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// Two publishers and two subscribers, started interleaved against a
// nats-server of their own, find each other; both subscribers see every
// tick in the same order; a third subscriber started mid-stream receives
// from then on.
func TestCluster_TwoPubsTwoSubs_SameOrder_LateSubscriberServed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and five tickbus processes for several seconds; skipped with -short")
	}
	tickbus, natsBin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	port := freePort(t)
	startNATS(t, ctx, natsBin, port)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	dir := t.TempDir()
	// A long lease: this test is about order and joining, and with the
	// short default a loaded CI host misses renewals and fails over (the
	// sequences jump to a new epoch's range).
	common := []string{"--nats", url, "--topic", "cluster", "--idle", "yield", "--json", "--log-level", "info", "--log-format", "json",
		"--lease-ttl", testLease}
	sub := func(name string) *proc {
		return start(t, ctx, name, tickbus, nil, append([]string{"sub", "--node-id", name, "--interval", "200ms",
			"--seq-log", filepath.Join(dir, name+".seq")}, common...)...)
	}
	pub := func(name, dur, rate string) *proc {
		return start(t, ctx, name, tickbus, nil, append([]string{"pub", "--node-id", name, "--duration", dur, "--rate", rate,
			"--wait", "60s", "--wait-subs", "2"}, common...)...)
	}

	p1 := pub("p1", "5s", "1000")
	require.Equal(t, true, p1.waitEvent("ready", 30*time.Second)["home"], "the first publisher becomes the topic's home")
	s1 := sub("s1")
	s1.waitEvent("ready", 30*time.Second)
	p2 := pub("p2", "3s", "500")
	assert.Equal(t, false, p2.waitEvent("ready", 30*time.Second)["home"], "the second one finds the home")
	s2 := sub("s2")
	s2.waitEvent("ready", 30*time.Second)

	// Mid-stream: once s1 has received some ticks, a third subscriber.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st := s1.event("stats"); st != nil && num(st, "received") > 1000 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s3 := sub("s3")
	s3.waitEvent("ready", 30*time.Second)

	require.Equal(t, 0, p2.wait(60*time.Second), p2.errOut())
	require.Equal(t, 0, p1.wait(60*time.Second), p1.errOut())
	pub1, pub2 := p1.event("published"), p2.event("published")
	total := num(pub1, "published") + num(pub2, "published")
	last := max(num(pub1, "last"), num(pub2, "last"))
	if total != last {
		t.Logf("p1:\n%s\np2:\n%s", lossLines(p1), lossLines(p2))
	}
	require.Equal(t, total, last, "sequences 1..N, one per tick of either publisher (a jump of 4Mi is a failover: see the logs above)")

	sums := map[string]map[string]any{}
	for _, s := range []*proc{s1, s2, s3} {
		s.signal(15) // SIGTERM: drain, goodbye, summary
		require.Equal(t, 0, s.wait(30*time.Second), s.errOut())
		sums[s.name] = s.waitEvent("summary", time.Second)
	}
	for _, name := range []string{"s1", "s2"} {
		sm := sums[name]
		if num(sm, "received") != total {
			t.Logf("%s summary: %v\nstderr:\n%s", name, sm, map[string]*proc{"s1": s1, "s2": s2}[name].errOut())
		}
		assert.Equal(t, total, num(sm, "received"), "%s received every tick", name)
		assert.Zero(t, num(sm, "lost"), "%s lost nothing", name)
		assert.Equal(t, uint64(1), num(sm, "first"))
		assert.Equal(t, last, num(sm, "last"))
	}
	assert.Equal(t, sums["s1"]["hash"], sums["s2"]["hash"], "both subscribers saw the same order")
	q1, q2 := readSeqs(t, filepath.Join(dir, "s1.seq")), readSeqs(t, filepath.Join(dir, "s2.seq"))
	require.Len(t, q1, int(total))
	assert.Equal(t, q1, q2)

	late := sums["s3"]
	if !assert.Greater(t, num(late, "joined_at"), uint64(1), "s3 joined mid-stream") {
		t.Logf("s3 stderr:\n%s", s3.errOut())
	}
	assert.Greater(t, num(late, "received"), uint64(0))
	assert.Zero(t, num(late, "lost"), "after joining, s3 lost nothing")
	if !assert.Equal(t, last, num(late, "last"), "s3 received up to the end") {
		t.Logf("s3 summary %v\ns3 stderr:\n%s\np1 stderr:\n%s", late, s3.errOut(), p1.errOut())
	}
	q3 := readSeqs(t, filepath.Join(dir, "s3.seq"))
	require.NotEmpty(t, q3)
	// From its first tick on, s3 saw s1's sequence in the same order; ticks
	// it misses are only those claimed while a publisher was still adding
	// its ring (counted in before_join), and after that it misses nothing.
	joined := num(late, "joined_at")
	tail := q1[joined-1:]
	missed := 0
	j := 0
	for _, seq := range q3 {
		for j < len(tail) && tail[j] != seq {
			j++
			missed++
		}
		require.Less(t, j, len(tail), "s3's %s is not in s1's order", seq)
		j++
	}
	assert.LessOrEqual(t, uint64(missed), num(late, "before_join"), "every tick s3 missed is counted as lost while joining")
	half := q3[len(q3)/2:]
	assert.Equal(t, q1[len(q1)-len(half):], half, "once joined, s3 got every tick")
}
