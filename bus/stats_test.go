package bus_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/stats"
)

func TestStats_PublishAndSubscribe_OnInternalStatsSubjects(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))

	type got struct {
		subject string
		msg     string
	}
	var mu sync.Mutex
	var all, one []got
	stopAll, err := a.SubscribeStats("", func(subject string, msg []byte) {
		mu.Lock()
		all = append(all, got{subject, string(msg)})
		mu.Unlock()
	})
	require.NoError(t, err)
	stopOne, err := a.SubscribeStats("t1", func(subject string, msg []byte) {
		mu.Lock()
		one = append(one, got{subject, string(msg)})
		mu.Unlock()
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, stopAll()) }()

	require.NoError(t, b.PublishStats("t1", "engine-1", []byte("m1")))
	require.NoError(t, b.PublishStats("t2", "engine-2", []byte("m2")))
	require.NoError(t, b.PublishStatsSubject(stats.Subject("", "t1", "engine-3"), []byte("m3")))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(all) == 3 && len(one) == 2
	}, eventually, tick)
	mu.Lock()
	assert.Equal(t, got{stats.Subject("", "t1", "engine-1"), "m1"}, all[0])
	assert.Equal(t, "tickbus.stats.t2.engine-2", all[1].subject)
	assert.Equal(t, got{"tickbus.stats.t1.engine-3", "m3"}, one[1])
	mu.Unlock()
	require.NoError(t, stopOne())

	for _, bad := range []string{"tickbus.d.hb", "tickbus.stats.", "tickbus.stats.>", "other.stats.t.s", "tickbus.stats.t.*"} {
		assert.ErrorIs(t, b.PublishStatsSubject(bad, nil), bus.ErrInvalidConfig, bad)
	}
	_, err = a.SubscribeStats("t", nil)
	assert.ErrorIs(t, err, bus.ErrInvalidConfig)
}

func TestNode_ProviderFor_ShmOnSameHostElseTCPOrForced(t *testing.T) {
	cfg := testConfig("a", "")
	cfg.HostID = "h1"
	a := openNode(t, cfg)
	both := []string{rdma.ProviderShm, rdma.ProviderTCP}
	assert.Equal(t, rdma.ProviderShm, a.ProviderFor(bus.PeerInfo{HostID: "h1", Providers: both}))
	assert.Equal(t, rdma.ProviderTCP, a.ProviderFor(bus.PeerInfo{HostID: "h2", Providers: both}))
	assert.Equal(t, rdma.ProviderTCP, a.ProviderFor(bus.PeerInfo{HostID: "h1", Providers: []string{rdma.ProviderTCP}}))

	cfg = testConfig("b", a.ClientURL())
	cfg.Providers = []string{rdma.ProviderVerbs, rdma.ProviderTCP}
	b := openNode(t, cfg)
	assert.Equal(t, rdma.ProviderVerbs, b.ProviderFor(bus.PeerInfo{HostID: "h9", Providers: []string{rdma.ProviderTCP, rdma.ProviderVerbs}}))
	assert.Equal(t, rdma.ProviderTCP, b.ProviderFor(bus.PeerInfo{HostID: "h9", Providers: []string{rdma.ProviderShm, rdma.ProviderTCP}}))

	cfg = testConfig("c", a.ClientURL())
	cfg.Provider = rdma.ProviderTCP
	c := openNode(t, cfg)
	assert.Equal(t, rdma.ProviderTCP, c.ProviderFor(bus.PeerInfo{HostID: c.HostID(), Providers: both}))
}
