package multihost_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The partition tests' timings. Nothing here is asserted as a duration;
// they set up which path the product takes. The publisher's writer waits
// roleWait for a completion; the partition outlasts that wait by 3s, so the
// writer surely drops C's queue pair and publishes on while the link is
// still down, even when the wait itself runs late on a loaded host.

// TestMultiHost_Partition_LossySubscriberAccountsAndRecovers: host C's link
// goes down for 5s while host A publishes to lossy subscribers on B and C;
// every bus drops silent peers after 3s, so A's bus drops C (and C's
// drops A) during the partition and both hear each other afresh after it.
// The publisher is not stalled for the partition (it waits once for C's
// completions, drops C's queue pair and publishes on) and B keeps
// receiving throughout, losing nothing. C names every sequence it missed
// in an event: what it delivered and what it reported lost add up exactly
// to the range it was subscribed for; after the link is back it is reached
// again with a new queue pair and receives up to the last tick.
func TestMultiHost_Partition_LossySubscriberAccountsAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("partitions a host for 5s in a ~12s stream; skipped with -short")
	}
	partition(t, 5*time.Second, 3*time.Second)
}

// TestMultiHost_ShortPartition_LossySubscriberRecovers: the same with a
// partition longer than the publisher's wait for a completion but shorter
// than every bus's heartbeat timeout: the bus keeps listing C, so it is
// the publisher's reconnect of a failed queue pair that must reach C again
// (once, C stayed stranded here).
func TestMultiHost_ShortPartition_LossySubscriberRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("partitions a host for 5s in a ~12s stream; skipped with -short")
	}
	partition(t, 5*time.Second, 10*time.Second)
}

// partition runs the partition test with host C cut off for down, every
// role's bus dropping peers silent for hb.
func partition(t *testing.T, down, hb time.Duration) {
	const ticks, rate = 12000, 1000
	v := newVerdict(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, servers := cluster(t, ctx)
	out := func(name string) string { return filepath.Join(v.dir, name) }
	role := func(host int, name, r string, extra ...string) *proc {
		args := append([]string{"-nats", servers[host].URL, "-host", n.Hosts[host].Addr, "-name", name,
			"-out", out(name), "-n", strconv.Itoa(ticks), "-hb", hb.String()}, extra...)
		return start(t, v, n, host, name, r, args...)
	}
	// C's ring has 1024 slots: a second of ticks. A lossy ring that missed
	// ticks while its host was cut off resumes when the reconnected
	// publisher's writes lap its read position (it reports everything
	// passed over as overruns), so the stream after the partition must be
	// longer than one ring plus the reconnect. B's ring holds the whole
	// stream: after the partition the publisher catches up as fast as it
	// can, and on a loaded host B's reader has been seen paused for most of
	// a second meanwhile, lapped by 1024 slots (a loss it named, as an
	// overrun, but not one this test is about).
	subArgs := []string{"-upto", strconv.Itoa(ticks), "-timeout", "60s"}
	subB := role(1, "host-b", roleSub, append(subArgs, "-slots", "16384")...)
	subC := role(2, "host-c", roleSub, append(subArgs, "-slots", "1024")...)
	subB.expect(t, "READY", 30*time.Second)
	subC.expect(t, "READY", 30*time.Second)
	pub := role(0, "host-a", rolePub, "-subs", "2", "-rate", strconv.Itoa(rate))
	pub.expect(t, "PUBLISHING", 60*time.Second)

	time.Sleep(2 * time.Second)
	v.at("partitioning host C")
	linkDown := time.Now().UnixNano()
	require.NoError(t, n.SetLink(ctx, 2, false), "host C partitioned")
	time.Sleep(down)
	require.NoError(t, n.SetLink(ctx, 2, true), "host C back")
	linkUp := time.Now().UnixNano()
	v.count("partition_ms", (linkUp-linkDown)/1e6)

	last := pub.expect(t, "DONE", 60*time.Second)
	v.count("pub_last", last)
	v.check(assert.Equal(t, strconv.Itoa(ticks), last, "the publisher published every tick"), "the publisher published every tick")
	got := map[string]map[string]string{}
	for _, s := range []*proc{subB, subC} {
		got[s.name] = fields(s.expect(t, "DONE", 60*time.Second))
		t.Logf("%s: %v", s.name, got[s.name])
	}
	v.at("checking the records")
	rp, rb, rc := readRecords(t, out("host-a")), readRecords(t, out("host-b")), readRecords(t, out("host-c"))
	during := func(ns []int64) (k int) {
		for _, x := range ns {
			if x >= linkDown && x <= linkUp {
				k++
			}
		}
		return k
	}
	var pubNs, bNs, cNs []int64
	var skipped int
	var stall int64
	for i, p := range rp.pubs {
		pubNs = append(pubNs, p.ns)
		if i > 0 {
			skipped += int(p.seq - rp.pubs[i-1].seq - 1)
			stall = max(stall, p.ns-rp.pubs[i-1].ns)
		}
	}
	for _, tk := range rb.ticks {
		bNs = append(bNs, tk.ns)
	}
	// When the publisher resumed: the end of its first pause of at least
	// the writer's wait that began during the partition (its wait for C's
	// completions once C's send queue filled), or the partition's start if
	// it never paused so. A publisher that waited for C until the link came
	// back resumed only after linkUp.
	resumed := linkDown
	for i := 1; i < len(rp.pubs); i++ {
		if a, b := rp.pubs[i-1].ns, rp.pubs[i].ns; a >= linkDown && a < linkUp && b-a >= int64(roleWait) {
			resumed = b
			break
		}
	}
	afterWait := func(ns []int64) (k int) {
		for _, x := range ns {
			if x >= resumed && x <= linkUp {
				k++
			}
		}
		return k
	}
	var cAfter int
	for _, tk := range rc.ticks {
		cNs = append(cNs, tk.ns)
		if tk.ns > linkUp {
			cAfter++
		}
	}
	connects := subC.logCount("subscriber: publisher connected")
	drops := pub.logCount("publisher: subscriber gone; dropped its queue pair") + pub.logCount("publisher: subscriber's queue pair failed; dropped it")
	v.count("pub_during", during(pubNs))
	v.count("pub_resumed_ms_into_partition", (resumed-linkDown)/1e6)
	v.count("pub_after_wait", afterWait(pubNs))
	v.count("pub_skipped_seqs", skipped)
	v.count("pub_longest_pause_ms", stall/1e6)
	v.count("b_during", during(bNs))
	v.count("b_after_wait", afterWait(bNs))
	v.count("b_lost", got["host-b"]["lost"])
	v.count("b_events", eventSummary(rb.events))
	v.count("c_during", during(cNs))
	v.count("c_after", cAfter)
	v.count("c_last", got["host-c"]["last"])
	v.count("c_lost", got["host-c"]["lost"])
	v.count("c_events", eventSummary(rc.events))
	v.count("c_connects", connects)
	v.count("pub_connects", pub.logCount("publisher: subscriber connected"))
	v.count("pub_drops", drops)
	v.count("pub_subscriber_gone", pub.logCount("publisher: subscriber gone; dropped its queue pair"))
	t.Logf("during the partition: published %d (resumed %dms into it), B received %d, C received %d; C after it %d; C's events %s",
		during(pubNs), (resumed-linkDown)/1e6, during(bNs), during(cNs), cAfter, eventSummary(rc.events))

	// Not stalled for the partition: after its wait for C the publisher
	// published, and B received, before the link came back. A publisher
	// that waited for C until then resumed only after linkUp. No rate is
	// assumed: at a load of 50 on 2 cores the publisher was seen to catch
	// up at under 100 ticks a second, and how soon C's send queue fills
	// depends on its depth (link's) and on the rate.
	v.check(assert.Positive(t, afterWait(pubNs), "the publisher kept publishing during the partition"), "the publisher kept publishing during the partition")
	v.check(assert.Positive(t, afterWait(bNs), "host B kept receiving during the partition"), "host B kept receiving during the partition")

	v.check(assert.Equal(t, "0", got["host-b"]["lost"], "host B lost nothing"), "host B lost nothing")
	lostB, err := accounted("host-b", rb, 1, ticks)
	v.check(assert.NoError(t, err, "host B: every sequence delivered or named"), "host B: every sequence delivered or named")
	v.check(assert.Equal(t, uint64(0), lostB, "host B: every tick delivered"), "host B: every tick delivered")

	// C: every sequence delivered once or named by an event, the counters
	// agree with the events, and it received again after the partition.
	lostC, err := accounted("host-c", rc, 1, ticks)
	v.check(assert.NoError(t, err, "host C: every sequence delivered or named"), "host C: every sequence delivered or named")
	v.check(assert.Equal(t, strconv.Itoa(int(lostC)), got["host-c"]["lost"], "host C's counters say what its events named"), "host C's counters say what its events named")
	v.check(assert.Equal(t, strconv.Itoa(ticks), got["host-c"]["last"], "host C received the last tick"), "host C received the last tick")
	v.check(assert.Greater(t, cAfter, 0, "host C received again after the partition"), "host C received again after the partition")
	// The publisher lost host C (its writer's wait ran out, or the bus
	// heard nothing for longer than its timeout) and connected a fresh
	// queue pair once C was back.
	v.check(assert.GreaterOrEqual(t, connects, 2, "the publisher reconnected to host C with a new queue pair"), "the publisher reconnected to host C with a new queue pair")
}
