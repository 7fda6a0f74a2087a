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

// TestMultiHost_Partition_LossySubscriberAccountsAndRecovers: host C's link
// goes down for 2s while host A publishes to lossy subscribers on B and C.
// The publisher is never stalled (it keeps publishing through the
// partition) and B keeps receiving throughout, losing nothing. C names
// every sequence it missed in an event: what it delivered and what it
// reported lost add up exactly to the range it was subscribed for; after
// the link is back it is reached again and receives up to the last tick.
func TestMultiHost_Partition_LossySubscriberAccountsAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("partitions a host for 2s in a ~10s stream; skipped with -short")
	}
	partition(t, 2*time.Second, time.Second)
}

// TestMultiHost_ShortPartition_LossySubscriberRecovers: the same with a
// partition longer than the publisher's wait for a completion (1s) but
// shorter than the publisher's bus's heartbeat timeout.
func TestMultiHost_ShortPartition_LossySubscriberRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("partitions a host for 1.3s in a ~10s stream; skipped with -short")
	}
	partition(t, 1300*time.Millisecond, 2*time.Second)
}

// partition runs the partition test with host C cut off for down, the
// publisher's bus dropping peers silent for hb.
func partition(t *testing.T, down, hb time.Duration) {
	const ticks, rate = 8000, 1000
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, servers := cluster(t, ctx)
	dir := recordDir(t)
	out := func(name string) string { return filepath.Join(dir, name) }
	role := func(host int, name, r string, extra ...string) *proc {
		args := append([]string{"-nats", servers[host].URL, "-host", n.Hosts[host].Addr, "-name", name,
			"-out", out(name), "-n", strconv.Itoa(ticks)}, extra...)
		return start(t, n, host, name, r, args...)
	}
	// Rings of 1024 slots: a second of ticks. A lossy ring that missed
	// ticks while its host was cut off resumes when the reconnected
	// publisher's writes lap its read position (it reports everything
	// passed over as overruns), so the stream after the partition must be
	// longer than one ring.
	subArgs := []string{"-upto", strconv.Itoa(ticks), "-timeout", "40s", "-slots", "1024"}
	subB := role(1, "host-b", roleSub, subArgs...)
	subC := role(2, "host-c", roleSub, subArgs...)
	subB.expect(t, "READY", 30*time.Second)
	subC.expect(t, "READY", 30*time.Second)
	// With hb well under down the publisher's bus surely drops host C and
	// connects afresh when C is heard again. (A partition shorter than hb
	// strands C: see TestMultiHost_ShortPartition_LossySubscriberRecovers.)
	pub := role(0, "host-a", rolePub, "-subs", "2", "-rate", strconv.Itoa(rate), "-hb", hb.String())
	pub.expect(t, "PUBLISHING", 60*time.Second)

	time.Sleep(2 * time.Second)
	linkDown := time.Now().UnixNano()
	require.NoError(t, n.SetLink(ctx, 2, false), "host C partitioned")
	time.Sleep(down)
	require.NoError(t, n.SetLink(ctx, 2, true), "host C back")
	linkUp := time.Now().UnixNano()

	last := pub.expect(t, "DONE", 60*time.Second)
	require.Equal(t, strconv.Itoa(ticks), last, "the publisher published every tick")
	got := map[string]map[string]string{}
	for _, s := range []*proc{subB, subC} {
		got[s.name] = fields(s.expect(t, "DONE", 60*time.Second))
		t.Logf("%s: %v", s.name, got[s.name])
	}
	rp, rb, rc := readRecords(t, out("host-a")), readRecords(t, out("host-b")), readRecords(t, out("host-c"))
	during := func(ns []int64) (k int) {
		for _, v := range ns {
			if v >= linkDown && v <= linkUp {
				k++
			}
		}
		return k
	}
	var pubNs, bNs, cNs []int64
	for _, p := range rp.pubs {
		pubNs = append(pubNs, p.ns)
	}
	for _, tk := range rb.ticks {
		bNs = append(bNs, tk.ns)
	}
	var cAfter int
	for _, tk := range rc.ticks {
		cNs = append(cNs, tk.ns)
		if tk.ns > linkUp {
			cAfter++
		}
	}
	// Loose bounds (a quarter of the paced rate): a stall of the publisher
	// on the partitioned host would show as (close to) nothing.
	nominal := int(rate * down.Seconds())
	t.Logf("during the partition: published %d, B received %d, C received %d; C after it %d; events C %+v",
		during(pubNs), during(bNs), during(cNs), cAfter, rc.events)
	assert.Greater(t, during(pubNs), nominal/4, "the publisher kept publishing during the partition")
	assert.Greater(t, during(bNs), nominal/4, "host B kept receiving during the partition")

	assert.Equal(t, "0", got["host-b"]["lost"], "host B lost nothing")
	assert.Equal(t, uint64(0), accounted(t, "host-b", rb, 1, ticks), "host B: every tick delivered")

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("partition from %d to %d\nhost C's log:\n%s\nhost A's log:\n%s", linkDown, linkUp, subC.log(), pub.log())
		}
	})
	// C: every sequence delivered once or named by an event, the counters
	// agree with the events, and it received again after the partition.
	lost := accounted(t, "host-c", rc, 1, ticks)
	assert.Equal(t, strconv.Itoa(int(lost)), got["host-c"]["lost"], "host C's counters say what its events named")
	assert.Equal(t, strconv.Itoa(ticks), got["host-c"]["last"], "host C received the last tick")
	assert.Greater(t, cAfter, 0, "host C received again after the partition")
	// The bus lost host C (no heartbeat for longer than its timeout),
	// heard it again and the publisher connected a fresh queue pair.
	connects := subC.logCount("subscriber: publisher connected")
	t.Logf("host C: publisher connected %d times; publisher saw subscriber connected %d times, dropped %d",
		connects, pub.logCount("publisher: subscriber connected"),
		pub.logCount("publisher: subscriber gone; dropped its queue pair")+pub.logCount("publisher: subscriber's queue pair failed; dropped it"))
	assert.GreaterOrEqual(t, connects, 2, "the publisher reconnected to host C with a new queue pair")
}
