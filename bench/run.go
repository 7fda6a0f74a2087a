package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// ErrCaseFailed: a case that should have run failed; its row says how.
var ErrCaseFailed = errors.New("bench: case failed")

// Run runs the selected cases one after another, prints the table on
// stdout and writes the JSON file, the histogram logs and the scaling plot
// the config asks for. A case that cannot run here (ErrUnavailable) is a
// row that says why; a case that fails is a row that says how, and Run
// returns an error wrapping ErrCaseFailed after writing everything else.
func Run(ctx context.Context, cfg Config, stdout io.Writer) error {
	if cfg.Quick {
		cfg = cfg.quick()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger // the zero Logger writes nothing
	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return fmt.Errorf("bench: out dir: %w", err)
		}
	}
	printHeader(stdout, cfg)

	var (
		results []*Result
		failed  []error
		ref     *Result
		refCase benchCase
	)
	for _, name := range cfg.selected() {
		if err := ctx.Err(); err != nil {
			return err
		}
		log.Info().Str("case", name).Msg("bench case")
		t0 := time.Now()
		c := newCase(name)
		r, err := runCase(ctx, cfg, name, c)
		fmt.Fprintf(stdout, "ran %s in %v\n", name, time.Since(t0).Round(time.Millisecond))
		results = append(results, r)
		if err != nil {
			log.Warn().Err(err).Str("case", name).Msg("bench case failed")
			failed = append(failed, fmt.Errorf("%w: %s: %w", ErrCaseFailed, name, err))
		}
		if name == CaseTickbusShm && err == nil && r.Note == "" && cfg.Scaling {
			refCase = c // kept open for the scaling runs
		} else if cerr := c.close(); cerr != nil {
			failed = append(failed, fmt.Errorf("%w: %s: close: %w", ErrCaseFailed, name, cerr))
		}
		if name == CaseTickbusShm {
			ref = r
		}
	}
	setRatios(results, ref)
	fmt.Fprintln(stdout)
	writeTable(stdout, results, cfg)

	var outErrs []error
	if cfg.Scaling {
		pts, err := runScaling(ctx, cfg, refCase)
		if refCase != nil {
			if cerr := refCase.close(); cerr != nil {
				outErrs = append(outErrs, cerr)
			}
		}
		fmt.Fprintln(stdout)
		writeScalingTable(stdout, pts, err)
		if err != nil && !errors.Is(err, ErrUnavailable) {
			failed = append(failed, fmt.Errorf("%w: scaling: %w", ErrCaseFailed, err))
		}
		// Next to the results: the out directory, else the JSON file's.
		dir := cfg.Out
		if dir == "" && cfg.JSON != "" {
			dir = filepath.Dir(cfg.JSON)
		}
		if dir != "" && len(pts) > 0 {
			outErrs = append(outErrs, writeScalingFiles(dir, pts))
			fmt.Fprintf(stdout, "scaling plot: %s\n", filepath.Join(dir, "scaling.svg"))
		}
	}
	if cfg.JSON != "" {
		outErrs = append(outErrs, writeJSON(cfg.JSON, results))
	}
	if cfg.Out != "" {
		for _, r := range results {
			if r.hist != nil {
				outErrs = append(outErrs, writeHlog(filepath.Join(cfg.Out, r.Case+".hlog"), r))
			}
		}
	}
	return errors.Join(append(outErrs, failed...)...)
}

// runCase takes a case's figures: latency (or round trip), throughput
// single and batched, CPU per million ticks over the throughput runs.
func runCase(ctx context.Context, cfg Config, name string, c benchCase) (*Result, error) {
	r := &Result{Case: name, Mode: "one-way"}
	if cfg.PingPong {
		r.Mode = "round-trip"
	}
	setRatios([]*Result{r}, nil)
	if err := c.setup(ctx, cfg); err != nil {
		if errors.Is(err, ErrUnavailable) {
			r.Note = "unavailable: " + err.Error()
			return r, nil
		}
		r.Note = "failed: " + err.Error()
		return r, err
	}
	r.startMs = time.Now().UnixMilli()
	ph, err := c.latency(ctx, cfg)
	r.endMs = time.Now().UnixMilli()
	r.Cores = max(r.Cores, ph.cores)
	r.Lost += ph.lost
	if err != nil {
		r.addNote("failed: latency: " + err.Error())
		return r, err
	}
	r.setLatency(ph.hist)
	if r.Unsent = ph.unsent; r.Unsent > 0 {
		r.addNote(fmt.Sprintf("the publisher fell behind %d ticks/s: %d of %d paced ticks were never sent; each is in the latency figures at (stop - intended time), a lower bound",
			cfg.Rate, ph.unsent, ph.unsent+ph.sent))
	}

	var cpu time.Duration
	var ticks int64
	for _, batch := range []int{1, cfg.Batch} {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		ph, err := c.throughput(ctx, cfg, batch)
		if errors.Is(err, errNotApplicable) {
			r.addNote("throughput: not applicable (the probe sends nothing)")
			break
		}
		r.Cores = max(r.Cores, ph.cores)
		r.Lost += ph.lost
		if err != nil {
			r.addNote(fmt.Sprintf("failed: throughput (batch %d): %v", batch, err))
			return r, err
		}
		if batch == 1 {
			r.Throughput = f64(ph.throughput)
		} else {
			r.BatchedThroughput = f64(ph.throughput)
		}
		cpu += ph.cpu
		ticks += ph.delivered
	}
	if ticks > 0 {
		r.CPUPerMillion = f64(cpu.Seconds() / float64(ticks) * 1e6)
	}
	return r, nil
}

func printHeader(w io.Writer, cfg Config) {
	pin := "not pinned"
	if len(cfg.CPUs) > 0 {
		pin = fmt.Sprintf("hot threads pinned to CPUs %v (publisher first)", cfg.CPUs)
	}
	mode := "one-way latency"
	if cfg.PingPong {
		mode = "round trip (ping-pong)"
	}
	fmt.Fprintf(w, "tickbus bench: %s at %d ticks/s paced for %v per case; throughput runs of %v (single, batch %d); %d-byte messages; %s rings of %d slots\n",
		mode, cfg.Rate, cfg.Duration, cfg.ThroughputDuration, cfg.Batch, cfg.Size, cfg.RingMode, cfg.RingSlots)
	fmt.Fprintf(w, "machine: %d CPUs online, GOMAXPROCS %d, %s/%s, %s; idle strategy %q; each case runs alone, 2 hot threads (nats: +1 server)\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, pin, cfg.Idle)
	fmt.Fprintln(w, "latency is measured from the intended send time (coordinated omission included); ratios are to tickbus-shm")
}
