package multihost_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/netns"
)

// cluster makes three hosts with a clustered nats-server each; both go
// away when the test ends, pass or fail.
func cluster(t *testing.T, ctx context.Context) (*netns.Net, []*netns.NATSServer) {
	t.Helper()
	return clusterWith(t, ctx, netns.NATSOptions{})
}

// isolatedCluster is a cluster whose servers tell clients of no other
// server (netns.NATSOptions.NoAdvertise), so a node whose server dies
// stays away from NATS until that server is back. A node decides its
// buckets' replicas by the servers it knows, which is now one: so the
// home buckets are made first, replicated three times, by a node that
// is given all three, as in a cluster whose nodes know its servers; else
// they could live on the one server a test kills.
func isolatedCluster(t *testing.T, ctx context.Context) (*netns.Net, []*netns.NATSServer) {
	t.Helper()
	n, servers := clusterWith(t, ctx, netns.NATSOptions{NoAdvertise: true})
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL)
	}
	node, err := bus.Open(ctx, bus.Config{NodeID: "setup", HostID: "setup", LeaseTTL: leaseTTL, NATS: bus.NATSConfig{URLs: urls}})
	require.NoError(t, err)
	defer node.Close()
	_, err = node.FindHome(ctx, topic) // makes the buckets
	require.ErrorIs(t, err, bus.ErrNoHome)
	return n, servers
}

// clusterWith is cluster with the servers' options.
func clusterWith(t *testing.T, ctx context.Context, o netns.NATSOptions) (*netns.Net, []*netns.NATSServer) {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("needs network namespaces to stand in for hosts: %v", err)
	}
	n, err := netns.New(ctx, netns.Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	servers, err := n.StartNATSWith(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Stop()
		}
	})
	return n, servers
}

// verdict is what a failed multi-host test says last, so that a CI log
// that keeps only its head and tail still tells which check failed and
// the counts behind it: one summary line, logged by the test's last
// cleanup, naming the checks that failed (or the step a fatal failure
// stopped at), the key counts and the directory that keeps the roles'
// records and logs. Checks go through check, counts through count.
type verdict struct {
	t   *testing.T
	dir string // records and role logs; kept when the test fails

	mu     sync.Mutex
	step   string
	failed []string
	counts []string
}

// newVerdict makes the test's records directory and registers the
// summary; call it first, so its cleanup runs last (after the roles are
// killed and the cluster is gone).
func newVerdict(t *testing.T) *verdict {
	t.Helper()
	v := &verdict{t: t}
	t.Cleanup(v.report)
	dir, err := os.MkdirTemp("", "multihost-")
	require.NoError(t, err)
	v.dir = dir
	t.Cleanup(func() {
		if !t.Failed() {
			assert.NoError(t, os.RemoveAll(dir))
		}
	})
	return v
}

// at notes the step the test is at (a fatal failure stops there).
func (v *verdict) at(step string) {
	v.mu.Lock()
	v.step = step
	v.mu.Unlock()
}

// count notes a key count for the summary (the last value per key wins).
func (v *verdict) count(key string, val any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	kv := fmt.Sprintf("%s=%v", key, val)
	for i, c := range v.counts {
		if strings.HasPrefix(c, key+"=") {
			v.counts[i] = kv
			return
		}
	}
	v.counts = append(v.counts, kv)
}

// check records what failed when ok is false (ok from an assert call,
// which has already said why) and returns ok.
func (v *verdict) check(ok bool, what string) bool {
	if !ok {
		v.mu.Lock()
		v.failed = append(v.failed, what)
		v.mu.Unlock()
	}
	return ok
}

func (v *verdict) report() {
	if !v.t.Failed() {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	failed := "none of the named checks (a fatal failure above, the last step: " + v.step + ")"
	if len(v.failed) > 0 {
		failed = strings.Join(v.failed, "; ")
	}
	v.t.Logf("VERDICT %s FAILED: %s\n  counts: %s\n  records and role logs kept in %s",
		v.t.Name(), failed, strings.Join(v.counts, " "), v.dir)
}

// eventSummary condenses a subscriber's events for a log line: per kind,
// how many and the range they span.
func eventSummary(evs []event) string {
	type span struct {
		n        int
		from, to uint64
	}
	kinds := map[string]*span{}
	for _, e := range evs {
		s := kinds[e.kind]
		if s == nil {
			s = &span{from: e.from}
			kinds[e.kind] = s
		}
		s.n++
		s.from, s.to = min(s.from, e.from), max(s.to, e.to)
	}
	var out []string
	for k, s := range kinds {
		out = append(out, fmt.Sprintf("%s×%d[%d..%d]", k, s.n, s.from, s.to))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

// logCount is how many of p's stderr lines (zerolog JSON) carry msg.
func (p *proc) logCount(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Count(p.stderr.String(), `"message":"`+msg+`"`)
}
