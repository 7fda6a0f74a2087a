package subscriber_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/rdmawin"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
)

// Every peer names a region by the rkey of the grant made for its own
// connection, never by the one in the announcement or the home record: on
// devices whose regions only grants reach (rdmawin: tcp with verbs-like
// per-queue-pair window rkeys; the region's own rkey and another queue
// pair's fail), a reliable subscriber receives every tick of the topic's
// home and of a second publisher that claims on it remotely, and attaches
// both credit cells and the home's journal. Each path is a grant whose
// rkey travels in a connect reply: the ring (subscriber accept), the home
// for claims and for journal reads (acceptHome), the home's own loopback
// pair, the credit cells and the fence.
func TestPubSub_GrantOnlyDevices_EveryPeerUsesItsOwnConnectionsRKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(id string, urls ...string) (*bus.Node, *link.Devices) {
		cfg := bus.Config{NodeID: id, Provider: rdma.ProviderTCP, LeaseTTL: testLease, HeartbeatTimeout: testHeartbeat}
		cfg.NATS.URLs = urls
		n, err := bus.Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { n.Close() })
		devs := link.NewDevices(link.DevicesConfig{HostID: n.HostID(), Wrap: rdmawin.Wrap})
		t.Cleanup(func() { devs.Close() })
		return n, devs
	}
	a, devA := open("gk-home")
	b, devB := open("gk-sub", a.ClientURL())
	c, devC := open("gk-claim", a.ClientURL())

	var got collect
	// GapTimeout 2 s, not 100 ms: the second publisher claims over tcp and
	// then writes; on a loaded CI host (-race, every package at once) a
	// claimant descheduled for over 100 ms between the two had its tick
	// named a gap (ring.Config.GapTimeout says to keep it above that), and
	// what this test checks is rkeys, not the gap timeout.
	sub, err := subscriber.New(ctx, b, devB, subscriber.Config{Topic: "gk", Provider: rdma.ProviderTCP, Mode: ring.Reliable,
		Slots: 64, Idle: rdma.Yield{}, StatsInterval: -1, GapTimeout: 2 * time.Second}, &got)
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	home, err := publisher.New(ctx, a, devA, publisher.Config{Topic: "gk", Provider: rdma.ProviderTCP, Idle: rdma.Yield{}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer home.Close()
	require.True(t, home.IsHome())
	other, err := publisher.New(ctx, c, devC, publisher.Config{Topic: "gk", Provider: rdma.ProviderTCP, Idle: rdma.Yield{}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer other.Close()
	require.False(t, other.IsHome())
	require.NoError(t, home.WaitSubscribers(ctx, 1))
	require.NoError(t, other.WaitSubscribers(ctx, 1))
	require.Eventually(t, func() bool { return sub.Counters().Credits == 2 }, 20*time.Second, 5*time.Millisecond,
		"both credit cells attached: %+v", sub.Counters())
	require.Eventually(t, func() bool { return sub.Counters().JournalEpoch == home.Epoch() }, 20*time.Second, 5*time.Millisecond,
		"the home's journal attached: %+v", sub.Counters())

	const n = 200 // each; ~6 laps of the ring in all: only credits let them through
	// The subscriber polls on its own goroutine, as a real one does: a
	// reliable ring's credit goes back on a later (idle) poll, so a
	// publisher waiting for room must not be the only thing that would
	// poll (it was, and waited out its timeout about once in six runs).
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for got.count() < 2*n && ctx.Err() == nil {
			sub.Poll()
		}
	}()
	defer func() { cancel(); <-polled }() // a failed publish: no Poll left running into Close
	for i := 0; i < n; i++ {
		for _, p := range []*publisher.Publisher{home, other} {
			_, err := p.Publish(0x51, []byte("granted"), time.Now().UnixNano())
			require.NoError(t, err)
		}
	}
	<-polled
	require.Equal(t, 2*n, got.count(), "every tick of both publishers: %+v", sub.Counters())
	got.mu.Lock()
	defer got.mu.Unlock()
	for i, s := range got.seqs {
		require.Equal(t, uint64(i+1), s, "in order, none lost")
	}
	assert.Empty(t, got.events)
	assert.Zero(t, home.Stats().Dropped, "no target dropped by a refused write")
	assert.Zero(t, other.Stats().Dropped)
}
