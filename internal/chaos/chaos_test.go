package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChaos_HomeKilledStoppedPartitioned_EverySequenceOnceOrNamed: three
// hosts (network namespaces), each with a nats-server of one three-server
// JetStream cluster, a publisher (host 1's claims by fetch-and-add, the
// others' by compare-and-swap) and a subscriber (hosts 0 and 1 lossy, host
// 2 reliable); peers of one host talk over shm, across hosts over tcp.
// While they run, the harness in turn SIGKILLs the topic's home (and starts
// a new publisher in its place), SIGSTOPs the home for 3s, cuts a host's
// link for 2s, restarts one nats-server and restarts a publisher that is
// not the home; round after round until the publishers published at least
// a million ticks (a hundred thousand and one round with -short). After
// each fault every subscriber must deliver again. Then the checker proves,
// from what every process recorded: per subscriber, every sequence from
// its first to its last delivered exactly once or named by exactly one
// event; every subscriber delivered the same ticks at the same sequences
// (one order); no sequence carried two ticks, against what the publishers
// recorded. The failovers the subscribers saw are listed.
func TestChaos_HomeKilledStoppedPartitioned_EverySequenceOnceOrNamed(t *testing.T) {
	target, rounds, rate := uint64(1_000_000), 2, 10000.0
	budget := 150 * time.Second
	if testing.Short() {
		target, rounds, rate = 100_000, 1, 2000
		budget = 120 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget+90*time.Second)
	defer cancel()
	h := newHarness(t, ctx)
	h.rate, h.batch = rate, []int{64, 64, 16}
	h.startSub(0, "lossy")
	h.startSub(1, "lossy")
	h.startSub(2, "reliable")
	for slot := range 3 {
		h.startPub(slot)
	}
	h.progress("start", 60*time.Second)
	first := h.waitHome(20 * time.Second)
	h.note("publishing; the home is %s", h.pubs[first].name)

	deadline := h.start.Add(budget)
	for round := 0; ; round++ {
		h.killHome()
		h.stopHome(3 * time.Second)
		host := h.home() // the home's host first, another host the next round
		if host < 0 || round%2 == 1 {
			host = (max(host, 0) + 1) % 3
		}
		h.partition(host, 2*time.Second)
		h.restartNATS(round % 3)
		h.restartPub()
		h.note("round %d done: %d ticks published", round+1, h.published())
		if (round+1 >= rounds && (h.published() >= target || testing.Short())) || time.Now().After(deadline) {
			break // -short: one round of faults, then the ticks that are still missing
		}
	}
	for h.published() < target && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	published := h.published()
	r := h.finish()
	if r.Err() != nil {
		h.verdict = r.Summary(10)
	}
	require.NoError(t, r.Err(), r.String())
	if !assert.GreaterOrEqual(t, published, target, "the publishers published at least %d ticks within %v", target, budget) {
		h.verdict = fmt.Sprintf("the publishers published %d ticks within %v, want at least %d", published, budget, target)
	}
	var last uint64
	for _, p := range r.Subscribers {
		last = max(last, p.Last)
	}
	for _, s := range r.Subscribers {
		if !assert.Equal(t, last, s.Last, "%s delivered up to the last tick", s.Name) ||
			!assert.Greater(t, s.Delivered, int(target)/10, "%s delivered a good part of the stream", s.Name) {
			h.verdict = r.String()
		}
	}
	for _, f := range h.faults {
		t.Log(f)
	}
}
