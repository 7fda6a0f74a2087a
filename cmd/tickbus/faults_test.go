package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logLines returns the JSON log lines of a process's stderr whose message
// contains msg.
func logLines(p *proc, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(p.errOut(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if s, _ := m["message"].(string); strings.Contains(s, msg) {
				out = append(out, m)
			}
		}
	}
	return out
}

func waitReceived(t *testing.T, p *proc, n uint64, timeout time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st := p.event("stats"); st != nil && num(st, "received") >= n {
			return num(st, "received")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not receive %d ticks within %v\n%s\n%s", p.name, n, timeout, p.out(), p.errOut())
	return 0
}

// A SIGKILLed subscriber: the publisher notices within the heartbeat
// timeout, drops its queue pair, keeps serving the other, and says so in a
// few log lines, not a storm.
func TestFaults_SubscriberKilled_PublisherDropsItAndServesTheOther(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and three tickbus processes for several seconds; skipped with -short")
	}
	tickbus, natsBin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	port := freePort(t)
	startNATS(t, ctx, natsBin, port)
	common := []string{"--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--topic", "kill", "--idle", "yield", "--json",
		"--log-level", "info", "--log-format", "json", "--lease-ttl", testLease}
	s1 := start(t, ctx, "s1", tickbus, nil, append([]string{"sub", "--node-id", "s1", "--interval", "200ms"}, common...)...)
	s2 := start(t, ctx, "s2", tickbus, nil, append([]string{"sub", "--node-id", "s2", "--interval", "200ms"}, common...)...)
	s1.waitEvent("ready", 30*time.Second)
	s2.waitEvent("ready", 30*time.Second)
	pub := start(t, ctx, "pub", tickbus, nil, append([]string{"pub", "--node-id", "p", "--rate", "1000", "--duration", "7s",
		"--wait", "60s", "--wait-subs", "2"}, common...)...)
	waitReceived(t, s2, 500, 60*time.Second)
	killed := time.Now()
	s2.signal(syscall.SIGKILL)
	s2.wait(10 * time.Second)

	require.Equal(t, 0, pub.wait(60*time.Second), pub.errOut())
	published := num(pub.waitEvent("published", time.Second), "published")
	s1.signal(syscall.SIGTERM)
	require.Equal(t, 0, s1.wait(30*time.Second), s1.errOut())
	sum := s1.waitEvent("summary", time.Second)
	assert.Equal(t, published, num(sum, "received"), "the other subscriber got every tick")
	assert.Zero(t, num(sum, "lost"))

	// Dropped once, whichever the publisher noticed first: its queue pair's
	// failure (the peer socket's EOF), then the heartbeat timeout
	// ("subscriber gone"); or, on a loaded machine, the timeout while the
	// queue pair was still up, the bus holding the subscriber until the
	// queue pair failed ("dropped a subscriber whose node is unheard"; CI
	// saw the EOF 4 s after the kill)
	gone := append(logLines(pub, "subscriber gone"), logLines(pub, "dropped a subscriber whose node is unheard")...)
	var s2gone []map[string]any
	for _, m := range gone {
		if strings.HasPrefix(fmt.Sprint(m["subscriber"]), "s2/") {
			s2gone = append(s2gone, m)
		}
	}
	require.Len(t, s2gone, 1, "the publisher dropped s2 once\n%s", pub.errOut())
	assert.Contains(t, s2gone[0]["error"], "lost", "dropped for silence (heartbeat timeout), not a goodbye")
	at, err := time.Parse(time.RFC3339, fmt.Sprint(s2gone[0]["time"]))
	require.NoError(t, err)
	// The default heartbeat timeout is 2 s; log times have 1 s resolution
	// and this machine is shared, so allow 3 s more.
	assert.Less(t, at.Sub(killed.Truncate(time.Second)), 5*time.Second, "noticed within the heartbeat timeout")
	// No storm: every warning or error the publisher logged, all causes.
	var noisy int
	for _, line := range strings.Split(pub.errOut(), "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
			noisy++
		}
	}
	assert.Less(t, noisy, 10, "a handful of warnings, not one per tick\n%s", pub.errOut())
}

// NATS stops mid-run: ticks keep flowing between nodes already connected;
// when it is back, discovery resumes and a new subscriber is served.
func TestFaults_NATSDownAndBack_DataFlowsAndDiscoveryResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts nats-server under running tickbus processes; skipped with -short")
	}
	tickbus, natsBin := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	port := freePort(t)
	ns := startNATS(t, ctx, natsBin, port)
	common := []string{"--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--topic", "outage", "--idle", "yield", "--json",
		"--log-level", "info", "--log-format", "json"}
	s1 := start(t, ctx, "s1", tickbus, nil, append([]string{"sub", "--node-id", "s1", "--interval", "200ms"}, common...)...)
	s1.waitEvent("ready", 30*time.Second)
	pub := start(t, ctx, "pub", tickbus, nil, append([]string{"pub", "--node-id", "p", "--rate", "500", "--duration", "12s",
		"--wait", "60s", "--wait-subs", "1"}, common...)...)
	before := waitReceived(t, s1, 300, 60*time.Second)

	ns.signal(syscall.SIGTERM)
	ns.wait(20 * time.Second)
	// While NATS is away the home cannot renew its JetStream lease, so it
	// stops granting claims before the lease could expire (a partitioned
	// home must not go on beside a successor): publishing pauses, the
	// publisher does not exit, and resumes through a newly elected home.
	time.Sleep(2 * time.Second)

	startNATS(t, ctx, natsBin, port)
	s2 := start(t, ctx, "s2", tickbus, nil, append([]string{"sub", "--node-id", "s2", "--interval", "200ms"}, common...)...)
	s2.waitEvent("ready", 30*time.Second)
	waitReceived(t, s2, 100, 60*time.Second)

	require.Equal(t, 0, pub.wait(60*time.Second), pub.errOut())
	published := num(pub.waitEvent("published", time.Second), "published")
	for _, s := range []*proc{s1, s2} {
		s.signal(syscall.SIGTERM)
		require.Equal(t, 0, s.wait(30*time.Second), s.errOut())
	}
	sum1, sum2 := s1.waitEvent("summary", time.Second), s2.waitEvent("summary", time.Second)
	assert.Equal(t, published, num(sum1, "received"), "s1 got every tick, across the outage")
	assert.Greater(t, num(sum1, "received"), before)
	assert.Zero(t, num(sum1, "lost"))
	assert.Greater(t, num(sum2, "received"), uint64(0))
	assert.Zero(t, num(sum2, "lost"))
	assert.Equal(t, num(sum1, "last"), num(sum2, "last"), "s2 was served to the end")
	if t.Failed() {
		for _, p := range []*proc{s1, s2} {
			var evs []string
			for _, l := range strings.Split(p.out(), "\n") {
				if !strings.Contains(l, `"event":"stats"`) {
					evs = append(evs, l)
				}
			}
			t.Logf("%s out (no stats):\n%s\n%s err:\n%s", p.name, strings.Join(evs, "\n"), p.name, lastLines(p.errOut(), 40))
		}
		// the publisher's side: its failovers, the subscribers it served or dropped
		t.Logf("pub out:\n%s\npub err:\n%s", pub.out(), lastLines(pub.errOut(), 80))
	}
}

// nonStats is a process's stdout without its stats lines: its events
// (gap, overrun, epoch, ...) and summary.
func nonStats(out string) string {
	var evs []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, `"event":"stats"`) {
			evs = append(evs, l)
		}
	}
	return strings.Join(evs, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// SIGINT and SIGTERM: the subscriber drains, says goodbye (the publisher
// drops it as withdrawn at once), unmaps, exits 0, and leaves no file in
// /dev/shm or the temp dir.
func TestFaults_SubscriberSignalled_DrainsSaysGoodbyeLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nats-server and tickbus processes; skipped with -short")
	}
	tickbus, natsBin := build(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			port := freePort(t)
			startNATS(t, ctx, natsBin, port)
			tmp := t.TempDir()
			env := []string{"TMPDIR=" + tmp}
			shmBefore := shmEntries(t)
			common := []string{"--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--topic", "bye", "--idle", "yield", "--json",
				"--log-level", "info", "--log-format", "json"}
			s := start(t, ctx, "sub", tickbus, env, append([]string{"sub", "--node-id", "s", "--interval", "200ms"}, common...)...)
			s.waitEvent("ready", 30*time.Second)
			pub := start(t, ctx, "pub", tickbus, env, append([]string{"pub", "--node-id", "p", "--rate", "500",
				"--wait", "60s", "--wait-subs", "1"}, common...)...)
			waitReceived(t, s, 200, 60*time.Second)
			s.signal(sig)
			require.Equal(t, 0, s.wait(30*time.Second), s.errOut())
			sum := s.waitEvent("summary", time.Second)
			assert.Zero(t, num(sum, "lost"), "every loss event the subscriber saw, and both logs:\n%s\nsubscriber:\n%s\npublisher:\n%s",
				nonStats(s.out()), lastLines(s.errOut(), 40), lastLines(pub.errOut(), 40))
			assert.NotEmpty(t, logLines(s, "subscriber: closed"), "the ring was closed (unmapped)")
			assert.NotEmpty(t, logLines(s, "bus: unsubscribed"), "it withdrew from the topic")

			deadline := time.Now().Add(10 * time.Second)
			for len(logLines(pub, "subscriber gone")) == 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			gone := logLines(pub, "subscriber gone")
			require.Len(t, gone, 1, "publisher:\n%s\nsubscriber:\n%s", pub.errOut(), s.errOut())
			assert.Contains(t, gone[0]["error"], "withdrawn", "a goodbye, not a timeout")

			pub.signal(syscall.SIGTERM)
			require.Equal(t, 0, pub.wait(30*time.Second), pub.errOut())
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "nothing left in the temp dir")
			for e := range shmEntries(t) {
				if !shmBefore[e] {
					assert.NotContains(t, e, "tickbus", "nothing of ours left in /dev/shm")
				}
			}
		})
	}
}

func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, e := range es {
		m[e.Name()] = true
	}
	return m
}
