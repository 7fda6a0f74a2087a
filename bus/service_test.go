package bus_test

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// gather sends a request to subj and collects replies until want arrived or
// the deadline passed.
func gather(t *testing.T, nc *nats.Conn, subj string, want int) [][]byte {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, nc.PublishRequest(subj, inbox, nil))
	var out [][]byte
	deadline := time.Now().Add(eventually)
	for len(out) < want && time.Now().Before(deadline) {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		out = append(out, m.Data)
	}
	return out
}

func TestService_PingInfoStats_ListEveryNode(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	openNode(t, testConfig("b", a.ClientURL()))
	openNode(t, testConfig("c", a.ClientURL()))
	nc, err := nats.Connect(a.ClientURL())
	require.NoError(t, err)
	defer nc.Close()

	var nodes []string
	for _, b := range gather(t, nc, "$SRV.PING.tickbus", 3) {
		var p micro.Ping
		require.NoError(t, json.Unmarshal(b, &p))
		assert.Equal(t, bus.ServiceName, p.Name)
		nodes = append(nodes, p.Metadata["node"])
	}
	sort.Strings(nodes)
	assert.Equal(t, []string{"a", "b", "c"}, nodes)

	infos := gather(t, nc, "$SRV.INFO", 3)
	require.Len(t, infos, 3)
	var info micro.Info
	require.NoError(t, json.Unmarshal(infos[0], &info))
	var subjects []string
	for _, e := range info.Endpoints {
		subjects = append(subjects, e.Subject)
	}
	assert.Contains(t, subjects, "tickbus.qp."+info.Metadata["node"])

	stats := gather(t, nc, "$SRV.STATS.tickbus", 3)
	require.Len(t, stats, 3)
	var st micro.Stats
	require.NoError(t, json.Unmarshal(stats[0], &st))
	require.NotEmpty(t, st.Endpoints)
	var ns bus.Stats
	require.NoError(t, json.Unmarshal(st.Endpoints[0].Data, &ns))
	assert.Equal(t, st.Metadata["node"], ns.Node)
	assert.Positive(t, ns.HeartbeatsSent)

	// the info endpoint: the node's own view
	m, err := nc.Request("tickbus.info.b", nil, eventually)
	require.NoError(t, err)
	var bs bus.Stats
	require.NoError(t, json.Unmarshal(m.Data, &bs))
	assert.Equal(t, "b", bs.Node)
	assert.Equal(t, "host-b", bs.Host)
	assert.True(t, bs.Connected)
	require.Eventually(t, func() bool { return len(a.Stats().Peers) == 2 }, eventually, tick)
	assert.Equal(t, []string{"b", "c"}, a.Stats().Peers)
}
