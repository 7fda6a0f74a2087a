package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The binaries every process test runs, built once per test binary.
var bins struct {
	once    sync.Once
	dir     string
	tickbus string
	nats    string
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		_ = os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// build compiles tickbus (and nats-server when withNATS) as a new user
// would, once.
func build(t *testing.T) (tickbus, natsServer string) {
	t.Helper()
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "tickbus-cli-test-")
		if err != nil {
			bins.err = err
			return
		}
		bins.dir = dir
		bins.tickbus = filepath.Join(dir, "tickbus")
		bins.nats = filepath.Join(dir, "nats-server")
		for _, b := range [][2]string{{bins.tickbus, "."}, {bins.nats, "github.com/nats-io/nats-server/v2"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			out, err := exec.CommandContext(ctx, "go", "build", "-o", b[0], b[1]).CombinedOutput()
			cancel()
			if err != nil {
				bins.err = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	require.NoError(t, bins.err)
	return bins.tickbus, bins.nats
}

// proc is a running process whose stdout lines (JSON events) and stderr
// are collected.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []map[string]any
	stdout strings.Builder
	stderr strings.Builder
	done   chan struct{}
	err    error
}

func start(t *testing.T, ctx context.Context, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Cancel = func() error { return p.cmd.Process.Kill() }
	p.cmd.WaitDelay = 5 * time.Second
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	errp, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var m map[string]any
			p.mu.Lock()
			p.stdout.WriteString(line + "\n")
			if json.Unmarshal([]byte(line), &m) == nil {
				p.events = append(p.events, m)
			}
			p.mu.Unlock()
		}
	}()
	go func() { // line by line, so a test can watch the log of a running process
		defer wg.Done()
		sc := bufio.NewScanner(errp)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, errp)
	}()
	go func() {
		wg.Wait()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitEvent waits for the first event named ev and returns it.
func (p *proc) waitEvent(ev string, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := p.event(ev); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := p.event(ev); m != nil {
				return m
			}
			p.t.Fatalf("%s exited (%v) without %q\nstdout:\n%s\nstderr:\n%s", p.name, p.err, ev, p.out(), p.errOut())
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.t.Fatalf("%s: no %q within %v\nstdout:\n%s\nstderr:\n%s", p.name, ev, timeout, p.out(), p.errOut())
	return nil
}

// event returns the last event named ev, or nil.
func (p *proc) event(ev string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.events) - 1; i >= 0; i-- {
		if p.events[i]["event"] == ev {
			return p.events[i]
		}
	}
	return nil
}

func (p *proc) out() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

func (p *proc) errOut() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("%s did not exit within %v\nstdout:\n%s\nstderr:\n%s", p.name, timeout, p.out(), p.errOut())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// testLease is the home lease (--lease-ttl) of the tests that are not
// about failover: with the short default a loaded CI host (every package
// at once on two cores) misses renewals and the home fails over mid-test.
const testLease = "30s"

func num(m map[string]any, k string) uint64 {
	f, _ := m[k].(float64)
	return uint64(f)
}

// freePort returns a loopback port free now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// natsStores keeps one JetStream store directory per port, so a server
// restarted on its port finds its state again, as a real one would.
var natsStores sync.Map

// startNATS runs nats-server as its own process on port, with JetStream
// (tickbus elects each topic's home in a key-value bucket).
func startNATS(t *testing.T, ctx context.Context, bin string, port int) *proc {
	t.Helper()
	dir, _ := natsStores.LoadOrStore(port, t.TempDir())
	p := start(t, ctx, "nats-server", bin, nil, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir.(string))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nats-server not listening on %d\n%s", port, p.errOut())
	return nil
}
