package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// caseCLIDefaults is the bench case that runs the CLI as a user first
// does: `tickbus sub` and `tickbus pub --rate 20000`, with no tuning
// flags, each its own process. runBench runs it itself (the bench package
// knows no commands); it is not among the default cases.
const caseCLIDefaults = "cli-defaults"

// cliDefaults is one run of the case.
type cliDefaults struct {
	Rate     float64       // the publisher's --rate
	Duration time.Duration // the publisher's --duration
	IdleFor  time.Duration // each idle window of the subscriber
}

// cliDefaultsResult is what one run measured.
type cliDefaultsResult struct {
	Published, Received, Lost uint64
	P50, P99, P999, Max       int64   // the subscriber's summary, every tick of the run
	IntervalP50               []int64 // the subscriber's per-interval p50s
	// CPU as a share of one core: the subscriber idle before the feed,
	// while the feed runs, idle after it; the publisher while it runs.
	SubIdleBefore, SubBusy, SubIdleAfter, PubBusy float64
	LoadBefore, LoadAfter                         string // /proc/loadavg
}

// settle is how long the subscriber is left after a change (subscribed,
// the feed ended) before an idle window starts: its idle strategy's spin
// and yield phases (about a millisecond) and the bus's control messages.
const cliSettle = 300 * time.Millisecond

// run starts a NATS server in this process, the subscriber and then the
// publisher as child processes of this binary (the demo's roles: the same
// code as the commands), and measures.
func (r cliDefaults) run(ctx context.Context, stderr io.Writer) (res cliDefaultsResult, err error) {
	ns, stop, err := startNATS()
	if err != nil {
		return res, err
	}
	defer stop()
	url := ns.ClientURL()
	res.LoadBefore = loadAvg()
	// Only where the bus is and the output format: every tuning knob
	// (idle strategy, ring, mode, batch) is the command's default.
	common := []string{"--nats", url, "--json", "--log-level", "warn"}
	sub, err := startPart(ctx, "sub", roleSub, common, stderr)
	if err != nil {
		return res, err
	}
	subExited := false
	defer func() {
		if !subExited {
			killPart(sub)
		}
	}()
	if err := waitEvent(sub, "ready", 30*time.Second); err != nil {
		return res, err
	}
	pid := sub.cmd.Process.Pid
	if res.SubIdleBefore, err = cpuShare(ctx, pid, cliSettle, r.IdleFor); err != nil {
		return res, err
	}

	pub, err := startPart(ctx, "pub", rolePub, append(slices.Clone(common),
		"--rate", strconv.FormatFloat(r.Rate, 'f', -1, 64), "--duration", r.Duration.String()), stderr)
	if err != nil {
		return res, err
	}
	pubExited := false
	defer func() {
		if !pubExited {
			killPart(pub)
		}
	}()
	if err := waitEvent(pub, "ready", 30*time.Second); err != nil {
		return res, err
	}
	sub0, err1 := processCPU(pid)
	pub0, err2 := processCPU(pub.cmd.Process.Pid)
	t0 := time.Now()
	if err := errors.Join(err1, err2); err != nil {
		return res, err
	}
	m, err := untilEvent(pub, "published", r.Duration+30*time.Second, func() { drainStats(sub, &res) })
	if err != nil {
		return res, err
	}
	var ps pubSummary
	if err := remarshal(m, &ps); err != nil {
		return res, err
	}
	if ps.Error != "" {
		return res, fmt.Errorf("publisher: %s", ps.Error)
	}
	res.Published = ps.Published
	// The publisher exits right after its summary, and its reader reaps
	// it: its /proc entry may be gone already. Its CPU at the end is its
	// exit's rusage, taken once it has exited; the subscriber's is read
	// then too, so both share one window.
	pubExited = true
	if err := <-pub.done; err != nil {
		return res, fmt.Errorf("publisher exited: %w", err)
	}
	sub1, err := processCPU(pid)
	el := time.Since(t0)
	if err != nil {
		return res, err
	}
	ru := pub.cmd.ProcessState
	pub1 := ru.UserTime() + ru.SystemTime()
	res.SubBusy, res.PubBusy = share(sub1-sub0, el), share(pub1-pub0, el)
	drainStats(sub, &res)
	if res.SubIdleAfter, err = cpuShare(ctx, pid, cliSettle, r.IdleFor); err != nil {
		return res, err
	}
	drainStats(sub, &res)

	_ = sub.cmd.Process.Signal(syscall.SIGTERM)
	m, err = untilEvent(sub, "summary", 30*time.Second, nil)
	if err != nil {
		return res, err
	}
	var ss subSummary
	if err := remarshal(m, &ss); err != nil {
		return res, err
	}
	subExited = true
	if err := <-sub.done; err != nil {
		return res, fmt.Errorf("subscriber exited: %w", err)
	}
	res.Received, res.Lost = ss.Received, ss.Lost
	res.P50, res.P99, res.P999, res.Max = ss.P50, ss.P99, ss.P999, ss.Max
	res.LoadAfter = loadAvg()
	return res, nil
}

// killPart kills p and waits for it to exit.
func killPart(p *part) {
	_ = p.cmd.Process.Kill()
	for range p.lines { // its reader closes lines before it waits
	}
	<-p.done
}

// waitEvent waits for p's JSON line whose event is ev.
func waitEvent(p *part, ev string, within time.Duration) error {
	_, err := untilEvent(p, ev, within, nil)
	return err
}

// untilEvent reads p's lines until one is event ev, calling each (if set)
// every 20 ms meanwhile.
func untilEvent(p *part, ev string, within time.Duration, each func()) (map[string]json.RawMessage, error) {
	deadline := time.After(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				return nil, fmt.Errorf("%s exited before it printed %q (see its errors above)", p.name, ev)
			}
			p.events = append(p.events, m)
			if event(m) == ev {
				return m, nil
			}
		case <-tick.C:
			if each != nil {
				each()
			}
		case <-deadline:
			return nil, fmt.Errorf("%s printed no %q within %v", p.name, ev, within)
		}
	}
}

// drainStats takes the subscriber's stats lines that arrived.
func drainStats(sub *part, res *cliDefaultsResult) {
	for {
		select {
		case m, ok := <-sub.lines:
			if !ok {
				return
			}
			sub.events = append(sub.events, m)
			if event(m) != "stats" {
				continue
			}
			var s struct {
				Received uint64 `json:"received"`
				P50      int64  `json:"p50_ns"`
			}
			if remarshal(m, &s) == nil && s.P50 > 0 {
				res.IntervalP50 = append(res.IntervalP50, s.P50)
			}
		default:
			return
		}
	}
}

// cpuShare waits settle, then measures pid's CPU over window, as a share
// of one core.
func cpuShare(ctx context.Context, pid int, settle, window time.Duration) (float64, error) {
	if err := sleepCtx(ctx, settle); err != nil {
		return 0, err
	}
	c0, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return 0, err
	}
	c1, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	return share(c1-c0, time.Since(t0)), nil
}

func share(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(cpu) / float64(wall)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func remarshal(m map[string]json.RawMessage, v any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// loadAvg is the first three fields of /proc/loadavg, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// print writes the case's lines.
func (r cliDefaults) print(w io.Writer, res cliDefaultsResult) {
	fmt.Fprintf(w, "cli-defaults: tickbus sub, then tickbus pub --rate %.0f --duration %v, each its own process, no tuning flags (idle adaptive, lossy ring)\n",
		r.Rate, r.Duration)
	fmt.Fprintf(w, "  published %d, received %d, lost %d\n", res.Published, res.Received, res.Lost)
	fmt.Fprintf(w, "  latency (receive - intended send): p50 %s p99 %s p99.9 %s max %s", fmtNs(res.P50), fmtNs(res.P99), fmtNs(res.P999), fmtNs(res.Max))
	if len(res.IntervalP50) > 0 {
		fmt.Fprintf(w, "; per-second p50 %s..%s", fmtNs(slices.Min(res.IntervalP50)), fmtNs(slices.Max(res.IntervalP50)))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  CPU, share of one core: subscriber idle before the feed %.1f%%, receiving %.1f%%, idle after it %.1f%%; publisher %.1f%%\n",
		100*res.SubIdleBefore, 100*res.SubBusy, 100*res.SubIdleAfter, 100*res.PubBusy)
	fmt.Fprintf(w, "  load average: %s before, %s after\n", res.LoadBefore, res.LoadAfter)
}
