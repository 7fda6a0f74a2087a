package bench

import (
	"context"
	"os"
	"time"
)

// benchCase is one column of the comparison.
type benchCase interface {
	// setup prepares what the runs share; an error wrapping ErrUnavailable
	// says the case cannot run here and why.
	setup(ctx context.Context, cfg Config) error
	// latency runs the paced one-way run, or the ping-pong run if
	// cfg.PingPong.
	latency(ctx context.Context, cfg Config) (phase, error)
	// throughput runs the flood with batch ticks per send.
	throughput(ctx context.Context, cfg Config, batch int) (phase, error)
	close() error
}

// newCase makes the case called name.
func newCase(name string) benchCase {
	switch name {
	case CaseChan:
		return &chanCase{}
	case CaseJitter:
		return &jitterCase{}
	case CaseFloor:
		return &floorCase{}
	case CaseNATS:
		return &natsCase{}
	}
	return newTickbusCase(name)
}

// pairCase runs a transport in publisher and subscriber child processes.
type pairCase struct {
	transport string
	url       string
	files     []*os.File
	// around, if set, wraps each run (a server's CPU over the run).
	around func(run func() (phase, error)) (phase, error)
}

func (c *pairCase) run(ctx context.Context, cfg Config, mode string, batch, pubs, subs int, d time.Duration) (phase, error) {
	spec := pairSpec{transport: c.transport, mode: mode, pubs: pubs, subs: subs, batch: batch, duration: d, url: c.url, files: c.files}
	run := func() (phase, error) { return runPair(ctx, cfg, spec) }
	if c.around != nil {
		return c.around(run)
	}
	return run()
}

func (c *pairCase) latency(ctx context.Context, cfg Config) (phase, error) {
	mode := modeLatency
	if cfg.PingPong {
		mode = modePingPong
	}
	return c.run(ctx, cfg, mode, 1, 1, 1, cfg.Duration)
}

func (c *pairCase) throughput(ctx context.Context, cfg Config, batch int) (phase, error) {
	return c.run(ctx, cfg, modeThroughput, batch, 1, 1, cfg.ThroughputDuration)
}
