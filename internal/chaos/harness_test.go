package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/netns"
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

// proc is one role process in a host.
type proc struct {
	name  string
	host  int
	pubID uint32 // publishers
	out   string // record file
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // every line but STAT
	done  chan struct{}

	mu      sync.Mutex
	stat    map[string]string // the latest STAT line
	said    string            // the latest other line (READY, DONE, ERR …)
	statAt  time.Time
	stderr  strings.Builder
	killed  bool // SIGKILLed: its record may lack its last ticks
	clean   bool // said DONE and exited 0
	stopped bool // SIGSTOPped now
}

func (p *proc) field(k string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stat[k]
}

func (p *proc) num(k string) uint64 {
	v, _ := strconv.ParseUint(p.field(k), 10, 64)
	return v
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stderr.String()
	if len(s) > 3000 {
		s = "…" + s[len(s)-3000:]
	}
	return s
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// expect waits for the next non-STAT line and returns what follows want.
func (p *proc) expect(t testing.TB, want string, timeout time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			<-p.done
			t.Fatalf("%s exited before %q: %v\nstderr:\n%s", p.name, want, p.cmd.ProcessState, p.log())
		}
		rest, found := strings.CutPrefix(l, want)
		if !found {
			t.Fatalf("%s said %q, want %q\nstderr:\n%s", p.name, l, want, p.log())
		}
		return strings.TrimSpace(rest)
	case <-time.After(timeout):
		t.Fatalf("%s: no %q within %v\nstderr:\n%s", p.name, want, timeout, p.log())
	}
	return ""
}

func fields(s string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// harness runs the roles in three hosts, each with a nats-server of one
// JetStream cluster, and injects the faults.
type harness struct {
	t       testing.TB
	ctx     context.Context
	net     *netns.Net          // nil: every role in the root namespace, on loopback
	servers []*netns.NATSServer // with net
	local   string              // without net: the one NATS server's URL
	dir     string
	start   time.Time

	pubs   []*proc // the current publisher in each slot (one per host)
	all    []*proc // every publisher process ever started
	subs   []*proc
	nextID uint32
	faults []string // what was done when, for the log
	deaths []death  // when a home was killed or stopped

	rate  float64
	batch []int // per slot

	// verdict is why the test failed, printed again as its last line.
	verdict string
}

// fatalf fails the test with the message, and keeps it as the verdict.
func (h *harness) fatalf(format string, args ...any) {
	h.t.Helper()
	h.verdict = fmt.Sprintf(format, args...)
	h.t.Fatal(h.verdict)
}

func newHarness(t testing.TB, ctx context.Context) *harness {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skipf("needs network namespaces to stand in for hosts: %v", err)
	}
	n, err := netns.New(ctx, netns.Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	h := baseHarness(t, ctx)
	servers, err := n.StartNATSWith(ctx, netns.NATSOptions{JetStreamDir: filepath.Join(h.dir, "js")})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Stop()
		}
	})
	for _, s := range servers {
		require.NoError(t, s.WaitJetStream(ctx))
	}
	warmUp(t, ctx, servers[0].URL)
	h.net, h.servers = n, servers
	h.start = time.Now()
	return h
}

// warmUp creates and deletes a replicated bucket, retrying each attempt
// after 2s: on a cluster just started the first stream request can go
// unanswered (netns's JetStream test shows it). This test is about faults
// of a running topic, not a cold cluster; the bus's own start is tested in
// bus and cmd/tickbus.
func warmUp(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: "chaos_warmup", Replicas: 3, Storage: jetstream.MemoryStorage})
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrBucketExists) {
			break
		}
		require.True(t, time.Now().Before(deadline), "JetStream cluster: a replicated bucket: %v", err)
	}
	require.NoError(t, js.DeleteKeyValue(ctx, "chaos_warmup"))
}

// newLocalHarness runs every role in this namespace against one
// nats-server with JetStream in this process: no root needed.
func newLocalHarness(t testing.TB, ctx context.Context) *harness {
	t.Helper()
	h := baseHarness(t, ctx)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: filepath.Join(h.dir, "js"), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(20*time.Second), "nats-server ready")
	h.local = s.ClientURL()
	return h
}

func baseHarness(t testing.TB, ctx context.Context) *harness {
	dir, err := os.MkdirTemp("", "chaos-")
	require.NoError(t, err)
	h := &harness{t: t, ctx: ctx, dir: dir, start: time.Now(), nextID: 100, pubs: make([]*proc, 3), rate: 1000, batch: []int{1, 1, 1}}
	keep := func() bool { return t.Failed() || os.Getenv("CHAOS_KEEP") != "" }
	// Registered first, so it runs last: a failed test's last lines say
	// why (a CI log keeps only the head and the tail of a long run, and
	// the roles' logs come before this).
	t.Cleanup(func() {
		if t.Failed() && h.verdict != "" {
			t.Logf("chaos: FAILED: %s", h.verdict)
		}
	})
	t.Cleanup(func() {
		if keep() {
			t.Logf("records kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	t.Cleanup(func() {
		for _, p := range append(append([]*proc{}, h.all...), h.subs...) {
			if p.alive() {
				p.cmd.Process.Signal(syscall.SIGCONT)
				p.cmd.Process.Kill()
				<-p.done
			}
		}
		if keep() {
			for _, p := range append(append([]*proc{}, h.all...), h.subs...) {
				p.mu.Lock()
				full := p.stderr.String()
				p.mu.Unlock()
				os.WriteFile(p.out+".log", []byte(full), 0o644)
				if t.Failed() {
					t.Logf("%s's log (whole in %s.log):\n%s", p.name, p.out, p.log())
				}
			}
		}
	})
	return h
}

// urls: the host's own server first, then the others.
func (h *harness) urls(host int) string {
	if h.net == nil {
		return h.local
	}
	u := []string{h.servers[host].URL}
	for i, s := range h.servers {
		if i != host {
			u = append(u, s.URL)
		}
	}
	return strings.Join(u, ",")
}

func (h *harness) spawn(host int, name, role string, args ...string) *proc {
	h.t.Helper()
	p := &proc{name: name, host: host, out: filepath.Join(h.dir, name), lines: make(chan string, 64), done: make(chan struct{})}
	addr, hostID := "127.0.0.1", "local"
	if h.net != nil {
		addr, hostID = h.net.Hosts[host].Addr, h.net.Hosts[host].Name
	}
	args = append([]string{"-nats", h.urls(host), "-host", addr, "-name", name, "-hostid", hostID, "-out", p.out}, args...)
	cmd, err := child.Command(context.Background(), role, args...)
	require.NoError(h.t, err)
	if h.net != nil {
		base := cmd
		cmd = h.net.Command(context.Background(), host, base.Path, base.Args[1:]...)
		cmd.Env = base.Env
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(h.t, err)
	p.stdin, err = cmd.StdinPipe()
	require.NoError(h.t, err)
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stderr.Write(b)
	})
	p.cmd = cmd
	require.NoError(h.t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			if rest, ok := strings.CutPrefix(l, "STAT "); ok {
				p.mu.Lock()
				p.stat, p.statAt = fields(rest), time.Now()
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			p.said = l
			p.mu.Unlock()
			p.lines <- l
		}
		close(p.lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() { cmd.Wait(); close(p.done) }()
	return p
}

// death is a home killed or stopped: no claim through it from ns on.
type death struct {
	what string
	ns   int64
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(b []byte) (int, error) { return w(b) }

// startSub starts a subscriber in host (lossy or reliable).
func (h *harness) startSub(host int, mode string) *proc {
	p := h.spawn(host, fmt.Sprintf("s%d-%s", host, mode), roleSub, "-mode", mode, "-cap", "4000000")
	h.subs = append(h.subs, p)
	p.expect(h.t, "READY", 60*time.Second)
	return p
}

// startPub starts a new publisher process in slot (= host): slot 1 claims
// by fetch-and-add, the others by compare-and-swap.
func (h *harness) startPub(slot int) *proc {
	h.nextID++
	claim := "cas"
	if slot == 1 {
		claim = "faa"
	}
	p := h.spawn(slot, fmt.Sprintf("p%d-%d", slot, h.nextID), rolePub, "-pubid", strconv.Itoa(int(h.nextID)), "-claim", claim,
		"-batch", strconv.Itoa(h.batch[slot]), "-rate", strconv.FormatFloat(h.rate, 'f', -1, 64), "-subs", strconv.Itoa(len(h.subs)))
	p.pubID = h.nextID
	h.all = append(h.all, p) // its log is shown if it fails to start
	p.expect(h.t, "READY", 60*time.Second)
	h.pubs[slot] = p
	return p
}

func (h *harness) note(format string, args ...any) {
	s := fmt.Sprintf("+%6.2fs ", time.Since(h.start).Seconds()) + fmt.Sprintf(format, args...)
	h.faults = append(h.faults, s)
	h.t.Log(s)
}

// home is the slot of the running publisher that says it is the topic's
// home (the highest epoch if, for a moment, two do), or -1.
func (h *harness) home() int {
	best, epoch := -1, uint64(0)
	for i, p := range h.pubs {
		if p == nil || !p.alive() || p.field("home") != "true" {
			continue
		}
		if e := p.num("epoch"); best < 0 || e > epoch {
			best, epoch = i, e
		}
	}
	return best
}

// waitNewHome waits until a running publisher is home in an epoch past
// epoch: the failover is done.
func (h *harness) waitNewHome(epoch uint64, timeout time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := h.home(); i >= 0 && h.pubs[i].num("epoch") > epoch {
			return i
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.fatalf("no publisher became the topic's home past epoch %d within %v", epoch, timeout)
	return -1
}

func (h *harness) waitHome(timeout time.Duration) int {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if i := h.home(); i >= 0 {
			return i
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.fatalf("no publisher says it is the topic's home after %v", timeout)
	return -1
}

// published: ticks the publishers say they published, over all processes.
func (h *harness) published() uint64 {
	var n uint64
	for _, p := range h.all {
		n += p.num("n")
	}
	return n
}

// progress waits until every subscriber delivered more ticks than now:
// the topic recovered from the last fault.
func (h *harness) progress(after string, timeout time.Duration) {
	h.t.Helper()
	before := make([]uint64, len(h.subs))
	for i, s := range h.subs {
		before[i] = s.num("n")
	}
	deadline := time.Now().Add(timeout)
	for i, s := range h.subs {
		for s.num("n") < before[i]+100 {
			if time.Now().After(deadline) {
				h.fatalf("%s: %s delivered nothing new within %v (stuck at %d, ring at %s); publishers now: %s",
					after, s.name, timeout, s.num("n"), s.field("next"), h.pubStats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// pubStats is every running publisher's latest STAT, for failure messages.
func (h *harness) pubStats() string {
	var out []string
	for _, p := range h.pubs {
		if p == nil {
			continue
		}
		st := fmt.Sprintf("%s n=%s last=%s home=%s epoch=%s errs=%s", p.name,
			p.field("n"), p.field("last"), p.field("home"), p.field("epoch"), p.field("errs"))
		if !p.alive() {
			p.mu.Lock()
			st += fmt.Sprintf(" EXITED (%v) after saying %q", p.cmd.ProcessState, p.said)
			p.mu.Unlock()
		}
		out = append(out, st)
	}
	return strings.Join(out, "; ")
}

// The faults.

func (h *harness) killHome() {
	slot := h.waitHome(20 * time.Second)
	p := h.pubs[slot]
	h.note("SIGKILL the home %s (epoch %s)", p.name, p.field("epoch"))
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	require.NoError(h.t, p.cmd.Process.Kill())
	<-p.done
	h.deaths = append(h.deaths, death{"SIGKILL " + p.name, time.Now().UnixNano()})
	next := h.waitNewHome(p.num("epoch"), 30*time.Second)
	h.note("%s is the home (epoch %s)", h.pubs[next].name, h.pubs[next].field("epoch"))
	h.progress("after the home was killed", 30*time.Second)
	q := h.startPub(slot)
	h.note("restarted slot %d as %s", slot, q.name)
}

func (h *harness) stopHome(d time.Duration) {
	slot := h.waitHome(20 * time.Second)
	p := h.pubs[slot]
	h.note("SIGSTOP the home %s (epoch %s) for %v", p.name, p.field("epoch"), d)
	require.NoError(h.t, p.cmd.Process.Signal(syscall.SIGSTOP))
	h.deaths = append(h.deaths, death{"SIGSTOP " + p.name, time.Now().UnixNano()})
	time.Sleep(d)
	require.NoError(h.t, p.cmd.Process.Signal(syscall.SIGCONT))
	h.note("SIGCONT %s", p.name)
	h.progress("after the home was stopped", 30*time.Second)
	h.oneHome("after the stopped home woke up", 10*time.Second)
}

// oneHome waits until exactly one running publisher says it is the home
// (a woken home must learn it lost the lease; the sequences it could
// still hand out are checked by the records).
func (h *harness) oneHome(after string, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var homes []string
		for _, p := range h.pubs {
			if p != nil && p.alive() && p.field("home") == "true" {
				homes = append(homes, p.name+" (epoch "+p.field("epoch")+")")
			}
		}
		if len(homes) == 1 {
			return
		}
		if time.Now().After(deadline) {
			h.fatalf("%s: %d publishers say they are the topic's home after %v: %v", after, len(homes), timeout, homes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) partition(host int, d time.Duration) {
	h.note("cut host %d's link for %v", host, d)
	require.NoError(h.t, h.net.SetLink(h.ctx, host, false))
	time.Sleep(d)
	require.NoError(h.t, h.net.SetLink(h.ctx, host, true))
	h.note("host %d's link is back", host)
	h.progress("after the partition", 30*time.Second)
}

func (h *harness) restartNATS(i int) {
	h.note("restart nats-server %d", i)
	require.NoError(h.t, h.servers[i].Restart(h.ctx))
	require.NoError(h.t, h.servers[i].WaitJetStream(h.ctx))
	h.note("nats-server %d is back", i)
	h.progress("after a nats-server restarted", 30*time.Second)
}

// restartPub stops a publisher that is not the home by closing its stdin
// (it exits 0 with a whole record) and starts a new one in its slot.
func (h *harness) restartPub() {
	home := h.home()
	slot := (home + 1) % 3
	p := h.pubs[slot]
	h.note("restart publisher %s", p.name)
	h.stopPub(p)
	q := h.startPub(slot)
	h.note("restarted slot %d as %s", slot, q.name)
	h.progress("after a publisher restarted", 30*time.Second)
}

func (h *harness) stopPub(p *proc) {
	h.t.Helper()
	p.stdin.Close()
	got := fields(p.expect(h.t, "DONE", 60*time.Second))
	<-p.done
	require.True(h.t, p.cmd.ProcessState.Success(), "%s exits 0: %v\n%s", p.name, p.cmd.ProcessState, p.log())
	p.mu.Lock()
	p.clean = true
	p.mu.Unlock()
	if fo := got["failovers"]; fo != "" {
		var ds []string
		for _, ns := range strings.Split(fo, ",") {
			v, _ := strconv.ParseInt(ns, 10, 64)
			ds = append(ds, time.Duration(v).Round(time.Millisecond).String())
		}
		h.t.Logf("%s failed over %d times, each taking (its own measure) %s", p.name, len(ds), strings.Join(ds, " "))
	}
}

// finish stops every publisher, then every subscriber, reads the records
// and checks them.
func (h *harness) finish() *Report {
	h.t.Helper()
	h.note("stopping the publishers")
	for _, p := range h.pubs { // all at once: on a loaded machine one by one took tens of seconds
		if p != nil && p.alive() {
			p.stdin.Close()
		}
	}
	for _, p := range h.pubs {
		if p != nil && p.alive() {
			h.stopPub(p)
		}
	}
	time.Sleep(500 * time.Millisecond)
	h.note("stopping the subscribers")
	for _, s := range h.subs {
		s.stdin.Close()
	}
	var subs []Subscriber
	for _, s := range h.subs {
		h.t.Logf("%s: %s", s.name, s.expect(h.t, "DONE", 60*time.Second))
		<-s.done
		require.True(h.t, s.cmd.ProcessState.Success(), "%s exits 0", s.name)
		recs, err := ReadFile(s.out)
		require.NoError(h.t, err)
		sub, err := SubscriberFrom(s.name, recs)
		require.NoError(h.t, err)
		subs = append(subs, sub)
	}
	var pubs []Publisher
	for _, p := range h.all {
		recs, err := ReadFile(p.out)
		require.NoError(h.t, err)
		pub, err := PublisherFrom(p.name, p.pubID, p.clean, recs)
		require.NoError(h.t, err)
		pubs = append(pubs, pub)
	}
	h.note("checking the records")
	r := Check(subs, pubs)
	h.note("checked")
	h.t.Log(r.String())
	for _, d := range h.deaths {
		var took []string
		for _, s := range subs {
			if f, ok := FailoverAfter(s, d.ns); ok {
				took = append(took, fmt.Sprintf("%s %v (seq %d → %d)", s.Name, f.Took.Round(time.Millisecond), f.LastOld.Seq, f.FirstNew.Seq))
			}
		}
		h.t.Logf("failover after %s at +%.2fs, old home's last tick to the new home's first: %s",
			d.what, time.Duration(d.ns-h.start.UnixNano()).Seconds(), strings.Join(took, "; "))
	}
	for _, s := range subs {
		for _, f := range Failovers(s) {
			h.t.Logf("failover seen by %s at +%.2fs: epoch event %d..%d, last tick via the old home seq %d, first via the new seq %d: %v",
				s.Name, time.Duration(f.LastOld.Ns-h.start.UnixNano()).Seconds(), f.Event.From, f.Event.To, f.LastOld.Seq, f.FirstNew.Seq, f.Took.Round(time.Millisecond))
		}
	}
	return r
}
