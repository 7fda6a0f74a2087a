package app

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tickbus/tickbus/bench"
)

func init() {
	register("bench", command{
		synopsis: "side-by-side latency and throughput against NATS, a Go channel and the hardware floor",
		about: `Runs tickbus and its peers one after another on this machine, with the same tick and
the same method, and prints one table with ratios to tickbus-shm. The YAML
file's keys are the lower-cased field names of bench.Config (duration, rate,
size, batch, cases, idle, quick, json, out, ...).`,
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
	if err := cfg.Validate(); err != nil {
		return usageError(stderr, "bench", err)
	}
	if err := bench.Run(ctx, *cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "tickbus bench: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
