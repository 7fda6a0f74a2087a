package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/rdma"
)

// errNotApplicable: the case has no such figure (the jitter probe sends
// nothing, so it has no throughput).
var errNotApplicable = errors.New("bench: not applicable")

// The jitter probe: two threads, in a child process like the other cases,
// each spinning on the latency run's schedule (one event every 1/Rate from
// a common start) and recording how late it saw each event, from the
// intended time. What it records is what the platform (scheduler,
// interrupts, the Go runtime, the neighbours on this machine) adds to any
// latency measured the same way; tickbus cannot do better than its tail.
func jitterMain(args []string) int {
	out := os.Stdout
	fs := flag.NewFlagSet(roleJit, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rate := fs.Int("rate", 1000, "")
	d := fs.Duration("duration", time.Second, "")
	idleName := fs.String("idle", "yield", "")
	cpus := fs.String("cpus", "", "")
	if err := fs.Parse(args); err != nil || *rate < 1 || *d <= 0 {
		_ = writeReport(out, report{Done: true, Err: fmt.Sprintf("bad args %q", args)})
		return 1
	}
	pins, err := parseCPUs(*cpus)
	if err == nil {
		_, err = rdma.ParseIdle(*idleName)
	}
	if err != nil {
		_ = writeReport(out, report{Done: true, Err: err.Error()})
		return 1
	}
	if err := writeReport(out, report{Ready: true}); err != nil {
		return 1
	}
	cpu0 := selfCPU()
	period := int64(time.Second) / int64(*rate)
	start := nanotime() + int64(5*time.Millisecond)
	end := start + int64(*d)
	type res struct {
		h   *hdrhistogram.Histogram
		n   int64
		err error
	}
	done := make(chan res, 2)
	for k := range 2 {
		go func() {
			if len(pins) > 0 {
				if err := pinThread(pins[k%len(pins)]); err != nil {
					done <- res{err: err}
					return
				}
			}
			idle, _ := rdma.ParseIdle(*idleName)
			h := newHist()
			var n int64
			for i := int64(0); ; i++ {
				intended := start + i*period
				if intended >= end {
					break
				}
				now := nanotime()
				for now < intended {
					idle.Idle(0)
					now = nanotime()
				}
				record(h, now-intended)
				n++
			}
			done <- res{h: h, n: n}
		}()
	}
	r := report{Done: true, hist: newHist()}
	for range 2 {
		x := <-done
		if x.err != nil {
			r.Err = x.err.Error()
			continue
		}
		r.hist.Merge(x.h)
		r.Count += x.n
	}
	r.CPUNs = int64(selfCPU() - cpu0)
	if err := writeReport(out, r); err != nil || r.Err != "" {
		return 1
	}
	return 0
}

type jitterCase struct{}

func (*jitterCase) setup(context.Context, Config) error { return nil }
func (*jitterCase) close() error                        { return nil }

func (*jitterCase) latency(ctx context.Context, cfg Config) (phase, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+30*time.Second)
	defer cancel()
	cpus := make([]string, len(cfg.CPUs))
	for i, c := range cfg.CPUs {
		cpus[i] = strconv.Itoa(c)
	}
	p, err := startProc(ctx, "jitter probe", roleJit, []string{
		"-rate", strconv.Itoa(cfg.Rate), "-duration", cfg.Duration.String(),
		"-idle", cfg.Idle, "-cpus", strings.Join(cpus, ","),
	}, nil)
	if err != nil {
		return phase{}, err
	}
	ph := phase{cores: 2}
	_, err = p.ready(ctx)
	var r report
	if err == nil {
		r, err = p.done(ctx)
	}
	_, serr := p.stop(3 * time.Second)
	ph.cpu = time.Duration(r.CPUNs)
	if err = errors.Join(err, serr); err != nil {
		return ph, err
	}
	ph.hist, ph.delivered = r.hist, r.Count
	if ph.hist == nil || ph.hist.TotalCount() == 0 {
		return ph, fmt.Errorf("bench: jitter probe recorded nothing")
	}
	return ph, nil
}

func (*jitterCase) throughput(context.Context, Config, int) (phase, error) {
	return phase{}, errNotApplicable
}
