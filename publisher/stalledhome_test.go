package publisher_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/tick"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

func init() { child.Register("publisher-home", homeMain) }

// homeMain runs a node on a host of its own whose publisher is the
// topic's home, prints "ready", and runs until stdin closes.
func homeMain(args []string) int {
	fs := flag.NewFlagSet("publisher-home", flag.ContinueOnError)
	url := fs.String("url", "", "NATS URL")
	topic := fs.String("topic", "", "topic")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// a long lease and heartbeat timeout: it is stopped for a while, and
	// must stay the home (this is about a home that does not answer, not
	// one that is gone)
	node, err := bus.Open(ctx, bus.Config{NodeID: "stalled-home", HostID: "stalled-home-host", NATS: bus.NATSConfig{URLs: []string{*url}},
		LeaseTTL: time.Minute, HeartbeatTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	p, err := publisher.New(ctx, node, devs, publisher.Config{Topic: *topic})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Close()
	fmt.Printf("ready %t\n", p.IsHome())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// A publisher claiming on a home in another process (over tcp) that stops
// answering (SIGSTOP: a starved or paused host; its lease lives on) gets
// the retryable ErrNoHome from Publish, never ring.ErrTimeout: a feed
// (RunFeed, `tickbus pub`) retries ErrNoHome and ended on anything else,
// with the home's link broken (the CLI test saw pub exit "timed out
// waiting for a completion"). Once the home runs again, publishing goes
// on through it.
func TestFailover_HomeStopsAnswering_PublishReturnsErrNoHomeThenGoesOn(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a home process for a few seconds; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openFoNode(t, ctx, "stall-s", "")
	cmd, err := child.Command(ctx, "publisher-home", "-url", s.node.ClientURL(), "-topic", "stall")
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
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case l := <-ready:
		require.Equal(t, "ready true", l, "the child is the topic's home")
	case <-ctx.Done():
		t.Fatal("the home process did not get ready")
	}

	// claims go to the other host's home over tcp
	p, err := publisher.New(ctx, s.node, s.devs, publisher.Config{Topic: "stall", Timeout: 200 * time.Millisecond,
		ConnectTimeout: 500 * time.Millisecond, FailoverTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	defer p.Close()
	require.False(t, p.IsHome())
	payload := make([]byte, tick.Size)
	for range 10 {
		_, err := p.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	// the signal is delivered, not yet obeyed: wait until every thread of
	// the home's process has stopped
	require.Eventually(t, func() bool { return stopped(cmd.Process.Pid) }, 30*time.Second, time.Millisecond)
	var noHome int
	for range 3 {
		// each publish: a claim unanswered for Timeout, then failover to
		// the same home (whose connect is not answered either)
		_, err := p.Publish(tick.MessageType, payload, time.Now().UnixNano())
		if err == nil {
			continue // answered before the stop (a claim already read by the home)
		}
		require.ErrorIs(t, err, publisher.ErrNoHome, "a home that does not answer is retryable")
		noHome++
	}
	require.NotZero(t, noHome, "publishes on a stopped home all succeeded; writer %+v", p.Stats())

	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	var last error
	require.Eventually(t, func() bool {
		_, last = p.Publish(tick.MessageType, payload, time.Now().UnixNano())
		if last != nil && !errors.Is(last, publisher.ErrNoHome) {
			return true // fails below
		}
		return last == nil
	}, 30*time.Second, time.Millisecond, "publishing goes on once the home answers again")
	require.NoError(t, last)
}

// stopped reports whether every thread of process pid is stopped
// (state T in /proc/<pid>/task/*/stat).
func stopped(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, the state follows its ')'
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}
