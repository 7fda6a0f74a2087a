package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/internal/dash"
)

// Child roles: the demo runs its publisher and subscribers as separate
// processes of this binary (or of a test binary whose TestMain calls
// child.Main).
const (
	rolePub = "tickbus-pub"
	roleSub = "tickbus-sub"
)

func init() {
	register("demo", command{
		synopsis: "embedded NATS, one synthetic publisher and two subscribers (separate processes), losses and latency at the end",
		about: `Starts an embedded NATS server, the dashboard, two subscriber processes and one
publisher process on one topic, runs the feed for --duration, then stops the
subscribers (SIGTERM: they drain, say goodbye and unmap) and prints, per
subscriber, ticks received, gaps, overruns and latency p50, p99, p99.9 and
max, and the commands that run each part by hand. Exit status 0 when every
subscriber received every published tick in the same order; 1 otherwise.`,
		run: runDemo,
	})
	child.Register(rolePub, func(args []string) int { return runRole(runPub, args) })
	child.Register(roleSub, func(args []string) int { return runRole(runSub, args) })
}

func runRole(f func(context.Context, []string, io.Writer, io.Writer) int, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return f(ctx, args, os.Stdout, os.Stderr)
}

// part is one child process of the demo and the JSON lines it printed.
type part struct {
	name   string
	cmd    *exec.Cmd
	lines  chan map[string]json.RawMessage
	done   chan error
	events []map[string]json.RawMessage
}

func startPart(ctx context.Context, name, role string, args []string, stderr io.Writer) (*part, error) {
	cmd, err := child.Command(ctx, role, args...)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	// On cancellation (SIGINT of the demo) ask the part to stop cleanly; kill
	// it only if it has not within 10 s.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &part{name: name, cmd: cmd, lines: make(chan map[string]json.RawMessage, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	return p, nil
}

// next returns the part's next JSON line, or false when it exited or the
// deadline passed.
func (p *part) next(deadline <-chan time.Time) (map[string]json.RawMessage, bool) {
	select {
	case m, ok := <-p.lines:
		if ok {
			p.events = append(p.events, m)
		}
		return m, ok
	case <-deadline:
		return nil, false
	}
}

func event(m map[string]json.RawMessage) string {
	var s string
	_ = json.Unmarshal(m["event"], &s)
	return s
}

// startNATS runs the demo's NATS server on loopback, with JetStream (homes
// are elected in its key-value buckets) in a temporary directory; clients
// must present this host's embedded token (bus.EmbeddedToken), which the
// demo's parts find in the runtime dir, never on a command line. stop
// shuts the server down and removes the directory (before, a goroutine
// removed it after the shutdown, which a process exiting at once never
// ran: every demo left its store in the temp dir).
func startNATS() (ns *server.Server, stop func(), err error) {
	token, err := bus.EmbeddedToken()
	if err != nil {
		return nil, nil, fmt.Errorf("embedded NATS: %w", err)
	}
	ns, dir, err := bus.ServeNATS("127.0.0.1:0", "tickbus-demo", token)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded NATS: %w", err)
	}
	return ns, func() { ns.Shutdown(); ns.WaitForShutdown(); _ = os.RemoveAll(dir) }, nil
}

// demoLeaseTTL is the demo home's lease when bus.lease_ttl is not set: a
// home that stops renewing for 3/4 of it (3.75 s) is given up. The bus
// default (750 ms, for failover within a second) makes a loaded host's
// demo show a needless epoch: named, never silent, but not what a demo of
// one publisher is for.
const demoLeaseTTL = 5 * time.Second

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := config.Load("demo", commands["demo"].about, args, stderr)
	if err != nil {
		return usageError(stderr, "demo", err)
	}
	log, _ := c.Logger(stderr)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tickbus demo: "+format+"\n", a...)
		return ExitFailed
	}
	ns, stop, err := startNATS()
	if err != nil {
		return fail("%v", err)
	}
	defer stop()
	url := ns.ClientURL() // the parts find the token in the runtime dir
	fmt.Fprintf(stdout, "tickbus demo: NATS at %s, topic %q, %d subscribers, %.0f ticks/s for %v\n",
		url, c.Topic, c.Demo.Subscribers, c.Pub.Rate, c.Demo.Duration)
	if c.Demo.Dash != "" {
		srv, err := dash.Start(ctx, dash.Config{NATS: dash.NATSConfig{URL: url}, Listen: c.Demo.Dash, Logger: log})
		if err != nil {
			return fail("dashboard: %v", err)
		}
		defer srv.Close()
		fmt.Fprintf(stdout, "dashboard: %s\n", srv.URL())
	}

	childLevel := c.Log.Level
	if childLevel == "info" {
		childLevel = "warn" // the demo summarises; the parts' info lines would drown it
	}
	common := []string{"--nats", url, "--topic", c.Topic, "--idle", c.Idle, "--slots", strconv.Itoa(c.Ring.Slots),
		"--slot-size", strconv.Itoa(c.Ring.SlotSize), "--log-level", childLevel, "--log-format", c.Log.Format, "--json"}
	if c.Bus.Provider != "" {
		common = append(common, "--provider", c.Bus.Provider)
	}
	// The demo's one publisher has no one to fail over to: its home holds
	// a lease that rides out a loaded host's stalls (demoLeaseTTL) unless
	// bus.lease_ttl says otherwise.
	lease := c.Bus.LeaseTTL
	if lease == 0 {
		lease = demoLeaseTTL
	}
	common = append(common, "--lease-ttl", lease.String())
	var subs []*part
	defer func() {
		for _, p := range subs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	for i := 1; i <= c.Demo.Subscribers; i++ {
		name := fmt.Sprintf("sub-%d", i)
		p, err := startPart(ctx, name, roleSub, append(append([]string{}, common...), "--node-id", "demo-"+name), stderr)
		if err != nil {
			return fail("%v", err)
		}
		subs = append(subs, p)
	}
	ready := time.After(30 * time.Second)
	for _, p := range subs {
		for {
			m, ok := p.next(ready)
			if !ok {
				return fail("%s did not start (see its errors above)", p.name)
			}
			if event(m) == "ready" {
				break
			}
		}
	}
	pubArgs := append(append([]string{}, common...), "--node-id", "demo-pub",
		"--rate", strconv.FormatFloat(c.Pub.Rate, 'f', -1, 64), "--duration", c.Demo.Duration.String(),
		"--instruments", strconv.Itoa(c.Pub.Instruments), "--batch", strconv.Itoa(c.Pub.Batch), "--venue", c.Pub.Venue,
		"--seed", strconv.FormatUint(c.Pub.Seed, 10), "--wait", "30s", "--wait-subs", strconv.Itoa(c.Demo.Subscribers))
	pub, err := startPart(ctx, "pub", rolePub, pubArgs, stderr)
	if err != nil {
		return fail("%v", err)
	}
	// Show the subscribers' per-second lines while the feed runs.
	var published pubSummary
	pubDone := false
	for !pubDone {
		select {
		case m, ok := <-pub.lines:
			if !ok {
				pubDone = true
				break
			}
			if event(m) == "published" {
				b, _ := json.Marshal(m)
				_ = json.Unmarshal(b, &published)
			}
		case <-ctx.Done():
			return fail("interrupted")
		default:
			progress(stdout, subs)
			time.Sleep(20 * time.Millisecond)
		}
	}
	pubErr := <-pub.done
	progress(stdout, subs)
	if pubErr != nil || published.Event == "" {
		return fail("publisher failed: %v %s", pubErr, published.Error)
	}

	// Stop the subscribers: SIGTERM, they drain, say goodbye, unmap.
	sums := make([]subSummary, len(subs))
	deadline := time.After(30 * time.Second)
	for i, p := range subs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		for {
			m, ok := p.next(deadline)
			if !ok {
				break
			}
			if event(m) == "summary" {
				b, _ := json.Marshal(m)
				_ = json.Unmarshal(b, &sums[i])
			}
		}
		if err := <-p.done; err != nil {
			return fail("%s exited: %v", p.name, err)
		}
	}
	subs = nil
	return report(stdout, stderr, c, url, published, sums)
}

// progress prints the subscribers' stats lines that arrived.
func progress(w io.Writer, subs []*part) {
	for _, p := range subs {
		for {
			select {
			case m, ok := <-p.lines:
				if !ok {
					goto next
				}
				p.events = append(p.events, m)
				if event(m) == "stats" {
					var s struct {
						Received, Gaps, Overruns uint64
						Rate                     float64
						Provider                 string
						P50                      int64 `json:"p50_ns"`
						P99                      int64 `json:"p99_ns"`
						P999                     int64 `json:"p999_ns"`
						Max                      int64 `json:"max_ns"`
					}
					b, _ := json.Marshal(m)
					_ = json.Unmarshal(b, &s)
					fmt.Fprintf(w, "  %s: %8.0f/s received %d, gaps %d, overruns %d, via %s, p50 %s p99 %s p99.9 %s max %s\n",
						p.name, s.Rate, s.Received, s.Gaps, s.Overruns, orDash(s.Provider), fmtNs(s.P50), fmtNs(s.P99), fmtNs(s.P999), fmtNs(s.Max))
				}
				continue
			default:
			}
			break
		}
	next:
	}
}

func report(stdout, stderr io.Writer, c *config.Config, url string, pub pubSummary, sums []subSummary) int {
	fmt.Fprintf(stdout, "\npublished %d ticks (seq %d..%d) in %.2fs, %.0f/s\n\n", pub.Published, pub.First, pub.Last, pub.Seconds, pub.Rate)
	fmt.Fprintf(stdout, "%-10s %10s %6s %9s %10s %10s %10s %10s  %s\n", "subscriber", "received", "gaps", "overruns", "p50", "p99", "p99.9", "max", "order hash")
	var problems []string
	for i, s := range sums {
		name := fmt.Sprintf("sub-%d", i+1)
		fmt.Fprintf(stdout, "%-10s %10d %6d %9d %10s %10s %10s %10s  %s\n", name, s.Received, s.Gaps, s.Overruns,
			fmtNs(s.P50), fmtNs(s.P99), fmtNs(s.P999), fmtNs(s.Max), s.Hash)
		switch {
		case s.Event == "":
			problems = append(problems, name+" printed no summary")
		case s.Received != pub.Published:
			problems = append(problems, fmt.Sprintf("%s received %d of %d", name, s.Received, pub.Published))
		case s.Lost != 0:
			problems = append(problems, fmt.Sprintf("%s lost %d", name, s.Lost))
		case s.First != pub.First || s.Last != pub.Last:
			problems = append(problems, fmt.Sprintf("%s saw %d..%d, published %d..%d", name, s.First, s.Last, pub.First, pub.Last))
		case s.Hash != sums[0].Hash:
			problems = append(problems, name+" saw another order than sub-1")
		}
	}
	via := make([]string, len(sums))
	for i, s := range sums {
		via[i] = fmt.Sprintf("sub-%d %s", i+1, orDash(s.Provider))
	}
	fmt.Fprintf(stdout, "\nproviders: %s\n", strings.Join(via, ", "))
	fmt.Fprintf(stdout, "\nlatency: receive time minus each tick's intended send time (paced at %.0f/s), one host, shared CPUs\n", c.Pub.Rate)
	fmt.Fprintf(stdout, "\nRun the parts by hand, each in its own terminal:\n")
	fmt.Fprintf(stdout, "  go run github.com/nats-io/nats-server/v2@latest -a 127.0.0.1 -p 4222   # or any NATS server\n")
	fmt.Fprintf(stdout, "  tickbus sub  --nats nats://127.0.0.1:4222 --topic %s\n", c.Topic)
	fmt.Fprintf(stdout, "  tickbus sub  --nats nats://127.0.0.1:4222 --topic %s --print\n", c.Topic)
	fmt.Fprintf(stdout, "  tickbus pub  --nats nats://127.0.0.1:4222 --topic %s --rate %.0f --duration %v\n", c.Topic, c.Pub.Rate, c.Demo.Duration)
	fmt.Fprintf(stdout, "  tickbus dash --nats nats://127.0.0.1:4222      # or: tickbus stat --nats nats://127.0.0.1:4222\n")
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "\nFAIL: %s\n", joinProblems(problems))
		fmt.Fprintf(stderr, "tickbus demo: ticks were lost or reordered: %s\n", joinProblems(problems))
		return ExitFailed
	}
	fmt.Fprintf(stdout, "\nOK: every subscriber received all %d ticks, in the same order, with no gaps or overruns\n", pub.Published)
	_ = url
	return ExitOK
}

func joinProblems(p []string) string {
	s := ""
	for i, x := range p {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}
