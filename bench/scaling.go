package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// Scaling kinds.
const (
	ScaleFanOut     = "fan-out"    // one publisher, N subscribers
	ScaleContention = "contention" // N publishers on one topic counter, one subscriber
)

// Fan-out and contention points.
var (
	fanOutPoints     = []int{1, 2, 4, 8}
	contentionPoints = []int{1, 2, 4}
)

// ScalePoint is one scaling run of tickbus-shm (single-tick sends).
type ScalePoint struct {
	Kind string `json:"kind"`
	N    int    `json:"n"`
	// ThroughputPerS is ticks/s delivered to the slowest subscriber.
	ThroughputPerS float64 `json:"throughput_per_s"`
	Delivered      int64   `json:"delivered"`
	Lost           int64   `json:"lost"`
	CPUPerMillion  float64 `json:"cpu_s_per_million"`
	Err            string  `json:"err,omitempty"`
}

// scaler is a case that can run several publishers and subscribers.
type scaler interface {
	scale(ctx context.Context, cfg Config, pubs, subs int) (phase, error)
}

// runScaling runs every fan-out and contention point of c (the
// tickbus-shm case, open).
func runScaling(ctx context.Context, cfg Config, c benchCase) ([]ScalePoint, error) {
	s, ok := c.(scaler)
	if c == nil || !ok {
		return nil, fmt.Errorf("%w: scaling runs on tickbus-shm, which did not run", ErrUnavailable)
	}
	var pts []ScalePoint
	var errs []error
	one := func(kind string, n, pubs, subs int) {
		if ctx.Err() != nil {
			return
		}
		ph, err := s.scale(ctx, cfg, pubs, subs)
		p := ScalePoint{Kind: kind, N: n, ThroughputPerS: ph.throughput, Delivered: ph.delivered, Lost: ph.lost}
		if ph.delivered > 0 {
			p.CPUPerMillion = ph.cpu.Seconds() / float64(ph.delivered) * 1e6
		}
		if err != nil {
			p.Err = err.Error()
			errs = append(errs, fmt.Errorf("%s %d: %w", kind, n, err))
		}
		pts = append(pts, p)
	}
	for _, n := range fanOutPoints {
		one(ScaleFanOut, n, 1, n)
	}
	for _, n := range contentionPoints {
		one(ScaleContention, n, n, 1)
	}
	return pts, errors.Join(append(errs, ctx.Err())...)
}

func writeScalingTable(w io.Writer, pts []ScalePoint, err error) {
	fmt.Fprintln(w, "scaling, tickbus-shm, single-tick sends (fan-out: 1 publisher, N subscribers; contention: N publishers, 1 subscriber)")
	if len(pts) == 0 {
		fmt.Fprintf(w, "not run: %v\n", err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "kind\tN\tticks/s (slowest sub)\tdelivered\tlost\tCPU s/M\t\n")
	for _, p := range pts {
		v := p.ThroughputPerS
		note := ""
		if p.Err != "" {
			note = "  error: " + p.Err
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.3f\t%s\n", p.Kind, p.N, fmtRate(&v), p.Delivered, p.Lost, p.CPUPerMillion, note)
	}
	_ = tw.Flush()
	if err != nil {
		fmt.Fprintf(w, "scaling errors: %v\n", err)
	}
}

// writeScalingFiles writes scaling.json and scaling.svg into dir.
func writeScalingFiles(dir string, pts []ScalePoint) error {
	b, err := json.MarshalIndent(pts, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode scaling: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scaling.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write scaling.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scaling.svg"), scalingSVG(pts), 0o644); err != nil {
		return fmt.Errorf("bench: write scaling.svg: %w", err)
	}
	return nil
}
