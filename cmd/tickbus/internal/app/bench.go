package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tickbus/tickbus/bench"
)

func init() {
	register("bench", command{
		synopsis: "side-by-side latency and throughput against NATS, a Go channel and the hardware floor",
		about: `Runs tickbus and its peers one after another on this machine, with the same tick and
the same method, and prints one table with ratios to tickbus-shm. The YAML
file's keys are the lower-cased field names of bench.Config (duration, rate,
size, batch, cases, idle, quick, json, out, ...).

--cases cli-defaults (never run unless named) runs the commands as a user
first does, each its own process with no tuning flags: tickbus sub, then
tickbus pub --rate (20000) --duration (3s; 10s gives a steadier figure).
It prints the subscriber's latency and the CPU share of one core that the
subscriber uses idle before the feed, while receiving and idle after it.`,
		run: runBench,
	})
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, log, err := parseExternal("bench", args, stderr, bench.DefaultConfig,
		func(c *bench.Config, fs *flag.FlagSet) { c.RegisterFlags(fs) })
	if err != nil {
		return usageError(stderr, "bench", err)
	}
	cfg.Logger = log
	// cli-defaults is this command's own case (the bench package knows no
	// commands): run it first, then the bench's cases, if any are left.
	cli := slices.Contains(cfg.Cases, caseCLIDefaults)
	if cli {
		cfg.Cases = slices.DeleteFunc(cfg.Cases, func(c string) bool { return c == caseCLIDefaults })
	}
	if err := cfg.Validate(); err != nil {
		return usageError(stderr, "bench", err)
	}
	if cli {
		r := cliDefaults{Rate: float64(cfg.Rate), Duration: cfg.Duration, IdleFor: 3 * time.Second}
		if cfg.Quick {
			r.Duration, r.IdleFor = min(r.Duration, time.Second), time.Second
		}
		res, err := r.run(ctx, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "tickbus bench: %s: %v\n", caseCLIDefaults, err)
			return ExitFailed
		}
		r.print(stdout, res)
		if len(cfg.Cases) == 0 {
			return ExitOK
		}
		fmt.Fprintln(stdout)
	}
	if err := bench.Run(ctx, *cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "tickbus bench: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
