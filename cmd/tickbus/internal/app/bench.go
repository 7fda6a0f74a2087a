package app

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tickbus/tickbus/bench"
	"github.com/tickbus/tickbus/internal/config"
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
	cfg := bench.DefaultConfig()
	var file string
	logc := config.Default().Log
	fs := flag.NewFlagSet("tickbus bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config.RegisterCommon(fs, &file, &logc)
	cfg.RegisterFlags(fs)
	fs.Usage = func() { config.Usage(fs, "bench", commands["bench"].about) }
	err := config.Parse(fs, args, &file, func(path string) error {
		d := bench.DefaultConfig()
		if err := config.DecodeFile(path, &d); err != nil {
			return err
		}
		cfg = d
		return nil
	})
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		return usageError(stderr, "bench", err)
	}
	log, err := logc.Logger(stderr)
	if err != nil {
		return usageError(stderr, "bench", err)
	}
	cfg.Logger = log
	if err := cfg.Validate(); err != nil {
		return usageError(stderr, "bench", err)
	}
	if err := bench.Run(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "tickbus bench: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
