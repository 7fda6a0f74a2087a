package multihost_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/netns"
)

// cluster makes three hosts with a clustered nats-server each; both go
// away when the test ends, pass or fail.
func cluster(t *testing.T, ctx context.Context) (*netns.Net, []*netns.NATSServer) {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("needs network namespaces to stand in for hosts: %v", err)
	}
	n, err := netns.New(ctx, netns.Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, n.Close()) })
	servers, err := n.StartNATS(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Stop()
		}
	})
	return n, servers
}

// recordDir is a directory for the roles' records, kept (and named in the
// log) when the test fails so its events and timings can be studied.
func recordDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "multihost-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("records kept in %s", dir)
			return
		}
		assert.NoError(t, os.RemoveAll(dir))
	})
	return dir
}

// logCount is how many of p's stderr lines (zerolog JSON) carry msg.
func (p *proc) logCount(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Count(p.stderr.String(), `"message":"`+msg+`"`)
}

// log is p's stderr so far, for failure messages.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}
