package netns

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

func needNetns(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("needs network namespaces: %v", err)
	}
}

// listed reports which of names `ip what list/show` still prints.
func listed(t *testing.T, args []string, names ...string) []string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, string(out))
	var found []string
	for _, n := range names {
		if strings.Contains(string(out), n) {
			found = append(found, n)
		}
	}
	return found
}

func TestNew_RejectsBadHostCount(t *testing.T) {
	for _, n := range []int{0, -1, 17} {
		_, err := New(context.Background(), Config{Hosts: n})
		assert.ErrorContains(t, err, "Hosts", "Hosts %d", n)
	}
}

func TestAvailable_SaysWhyNot(t *testing.T) {
	err := Available()
	if err == nil {
		t.Skip("namespaces are available here; nothing to explain")
	}
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.Greater(t, len(err.Error()), len(ErrUnavailable.Error()))
}

func TestNet_CreatesHostsAndCloseRemovesEverything(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := New(ctx, Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	require.Len(t, n.Hosts, 3)
	names := []string{n.Hosts[0].Name, n.Hosts[1].Name, n.Hosts[2].Name}
	assert.ElementsMatch(t, names, listed(t, []string{"netns", "list"}, names...))
	for i, h := range n.Hosts {
		out, err := n.Command(ctx, i, "ip", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Contains(t, string(out), h.Addr+"/24")
	}
	links := []string{n.bridge, n.veths[1], n.veths[2], n.veths[3]}
	assert.ElementsMatch(t, links, listed(t, []string{"link", "show"}, links...))

	require.NoError(t, n.Close())
	require.NoError(t, n.Close(), "second Close")
	assert.Empty(t, listed(t, []string{"netns", "list"}, names...))
	assert.Empty(t, listed(t, []string{"link", "show"}, links...))
}

func TestNew_FailureHalfWayLeavesNothing(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Step 13 is inside the second host's setup: the bridge, one whole
	// host and part of another exist when it fails.
	before, err := exec.Command("ip", "netns", "list").CombinedOutput()
	require.NoError(t, err)
	beforeLinks, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	require.NoError(t, err)
	id := randHex(3)
	_, err = New(ctx, Config{Hosts: 3, failAt: 13, id: id})
	require.ErrorIs(t, err, ErrCommand)
	assert.Contains(t, err.Error(), "injected failure")
	after, err := exec.Command("ip", "netns", "list").CombinedOutput()
	require.NoError(t, err)
	afterLinks, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	require.NoError(t, err)
	// Other packages' tests may run their own networks meanwhile: count only
	// the objects named with this network's id.
	assert.Equal(t, countID(string(before), id), countID(string(after), id), "namespaces left behind:\n%s", after)
	assert.Equal(t, countID(string(beforeLinks), id), countID(string(afterLinks), id), "links left behind:\n%s", afterLinks)
}

// countID counts lines naming an object of the network with this id.
func countID(out, id string) int {
	return strings.Count(out, "tb"+id)
}

func TestNATSCluster_MessagesCrossHostsAndSurviveALostServer(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := New(ctx, Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	servers, err := n.StartNATS(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Stop()
		}
	})
	require.Len(t, servers, 3)
	for i, s := range servers {
		assert.Contains(t, s.URL, n.Hosts[i].Addr)
	}

	// A new network's first dial from the root namespace was once refused
	// (CI, every package in parallel): the server was ready, the path to
	// it not yet. Dial again for a while; what is tested is what crosses.
	connect := func(s *NATSServer) *nats.Conn {
		deadline := time.Now().Add(10 * time.Second)
		for {
			nc, err := nats.Connect(s.URL, nats.Timeout(5*time.Second), nats.MaxReconnects(0))
			if err == nil {
				t.Cleanup(nc.Close)
				return nc
			}
			require.True(t, time.Now().Before(deadline), "connect to host %d at %s: %v", s.Host, s.URL, err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A message published at host 2 reaches a subscriber at host 0, once
	// the subscription's interest has crossed the route.
	crosses := func(from, to *NATSServer, subject string) {
		sub := connect(to)
		s, err := sub.SubscribeSync(subject)
		require.NoError(t, err)
		require.NoError(t, sub.Flush())
		pub := connect(from)
		deadline := time.Now().Add(20 * time.Second)
		for {
			require.NoError(t, pub.Publish(subject, []byte("tick")))
			m, err := s.NextMsg(200 * time.Millisecond)
			if err == nil {
				assert.Equal(t, "tick", string(m.Data))
				return
			}
			require.True(t, time.Now().Before(deadline), "no message from host %d to host %d", from.Host, to.Host)
		}
	}
	crosses(servers[2], servers[0], "x.a")
	crosses(servers[0], servers[1], "x.b")

	require.NoError(t, servers[1].Kill())
	crosses(servers[2], servers[0], "x.c")

	for _, s := range servers {
		require.NoError(t, s.Stop())
	}
	require.NoError(t, n.Close())
}

func TestNet_SetLink_PartitionsAHostAndHealsIt(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := New(ctx, Config{Hosts: 2})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	up := func() bool {
		out, err := exec.CommandContext(ctx, "ip", "-n", n.Hosts[1].Name, "link", "show", "eth0").CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.Contains(string(out), "state UP") || strings.Contains(string(out), ",UP")
	}
	_, noPing := exec.LookPath("ping")
	reach := func() bool {
		return n.Command(ctx, 0, "ping", "-c", "1", "-W", "1", n.Hosts[1].Addr).Run() == nil
	}
	require.True(t, up(), "host 1's link is up before the partition")
	if noPing == nil {
		require.True(t, reach(), "hosts reach each other before the partition")
	}
	require.NoError(t, n.SetLink(ctx, 1, false))
	assert.False(t, up(), "host 1's link is down")
	if noPing == nil {
		assert.False(t, reach(), "host 1 is unreachable while its link is down")
	}
	require.NoError(t, n.SetLink(ctx, 1, true))
	assert.True(t, up(), "host 1's link is up again")
	if noPing == nil {
		assert.Eventually(t, reach, 10*time.Second, 100*time.Millisecond, "host 1 is reachable again")
	}
	assert.ErrorContains(t, n.SetLink(ctx, 2, false), "no host")
}
