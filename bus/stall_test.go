package bus_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
)

func init() { child.Register("bus-watch-node", watchNodeMain) }

// watchNodeMain runs a node that prints "peers <ids>" whenever the peers it
// sees change and "down <id>" for each peer it drops, until stdin closes.
func watchNodeMain(args []string) int {
	fs := flag.NewFlagSet("bus-watch-node", flag.ContinueOnError)
	url := fs.String("url", "", "NATS URL")
	id := fs.String("id", "", "node id")
	hb := fs.Duration("hb", 0, "HeartbeatTimeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var mu sync.Mutex // one writer of stdout
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", a...)
		mu.Unlock()
	}
	cfg := testConfig(*id, *url)
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 250*time.Millisecond, *hb
	cfg.OnPeerDown = func(p bus.PeerInfo, err error) { say("down %s %v", p.ID, err) }
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := bus.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer n.Close()
	end := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(end)
	}()
	last := "-"
	for {
		var ids []string
		for _, p := range n.Peers() {
			ids = append(ids, p.ID)
		}
		if s := strings.Join(ids, ","); s != last {
			say("peers %s", s)
			last = s
		}
		select {
		case <-end:
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A node whose process did not run for longer than its heartbeat timeout
// (SIGSTOP here; a loaded host or a long pause alike) keeps the peers that
// kept sending heartbeats meanwhile: their heartbeats wait unread in its
// connection, and the stall is not counted as their silence. (It used to
// drop every peer on its first tick after the stall, closing every queue
// pair to them: a publisher so stalled on a loaded CI host dropped all its
// subscribers and failed over.) A peer that then really goes silent is
// still dropped.
func TestNode_OwnStall_KeepsPeersThatKeptBeating(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a node's process for 6s; skipped with -short")
	}
	_, url := startNatsd(t, freePort(t))
	cfg := testConfig("steady", url)
	cfg.HeartbeatInterval, cfg.HeartbeatTimeout = 250*time.Millisecond, 3*time.Second
	openNode(t, cfg)

	cmd, err := child.Command(context.Background(), "bus-watch-node", "-url", url, "-id", "sleeper", "-hb", "3s")
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	said := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
	require.Eventually(t, func() bool { return slices.Contains(said(), "peers steady") }, eventually, tick,
		"the sleeper sees the steady node: %v", said())

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(6 * time.Second) // twice the heartbeat timeout
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	// A second and a half of listening: the stall alone (6s) would have
	// aged the steady node out at once; its heartbeats (every 250ms) keep
	// it as long as it beats.
	time.Sleep(1500 * time.Millisecond)
	for _, l := range said() {
		assert.False(t, strings.HasPrefix(l, "down steady"), "the stalled node dropped a peer that kept beating: %v", said())
	}

	// A peer that then dies without a goodbye is still aged out.
	mortal := startProc(t, "bus-node", "-url", url, "-id", "mortal")
	require.Eventually(t, func() bool { return slices.Contains(said(), "peers mortal,steady") }, eventually, tick,
		"the sleeper sees the new peer: %v", said())
	mortal.kill()
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(said(), func(l string) bool { return strings.HasPrefix(l, "down mortal "+bus.ErrPeerLost.Error()) })
	}, 30*time.Second, tick, "a peer silent for the timeout is dropped as lost: %v", said())
}
