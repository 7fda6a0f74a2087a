package app

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tickbus/tickbus/internal/dash"
)

func init() {
	register("dash", command{
		synopsis: "web dashboard of every subscriber's latency, rates and losses (and /metrics)",
		about: `Connects to NATS, listens to the stats every subscriber publishes each second and
serves live charts of p50, p99, p99.9 and max per topic and subscriber, and
Prometheus /metrics. YAML keys are dash.Config's lower-cased field names
(nats: {url, user, ...}, listen, hlogdir, prefix, history).`,
		run: runDash,
	})
	register("stat", command{
		synopsis: "terminal view of every subscriber's rate, losses and latency, refreshed each second",
		about: `Connects to NATS and prints, every period, one line per topic and subscriber:
rate, received, gaps, overruns, the tail a closing subscriber named, provider
and the last interval's p50, p99, p99.9 and max (as AeronStat does for Aeron).`,
		run: runStat,
	})
}

func runDash(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, log, err := parseExternal("dash", args, stderr, func() dash.Config { return dash.Config{} },
		func(c *dash.Config, fs *flag.FlagSet) { c.RegisterFlags(fs) })
	if err != nil {
		return usageError(stderr, "dash", err)
	}
	cfg.Logger = log
	srv, err := dash.Start(ctx, *cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tickbus dash: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "dashboard: %s   (metrics: %smetrics; Ctrl-C stops)\n", srv.URL(), srv.URL())
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "tickbus dash: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

func runStat(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, log, err := parseExternal("stat", args, stderr, func() dash.StatConfig { return dash.StatConfig{} },
		func(c *dash.StatConfig, fs *flag.FlagSet) { c.RegisterFlags(fs) })
	if err != nil {
		return usageError(stderr, "stat", err)
	}
	cfg.Logger = log
	if err := dash.RunStat(ctx, *cfg, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tickbus stat: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
