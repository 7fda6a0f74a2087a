package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/ring"
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
	// PubCPUNs (fan-out only) is the publisher's thread CPU ns per tick
	// with N subscribers, measured in process (fanOutCPU); ExtraSubCPUNs is
	// what each subscriber beyond the first point's costs it (the target:
	// at most 15 ns).
	PubCPUNs      float64 `json:"pub_cpu_ns_per_tick,omitempty"`
	ExtraSubCPUNs float64 `json:"extra_sub_cpu_ns_per_tick,omitempty"`
	Err           string  `json:"err,omitempty"`
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
	if err := addFanOutCPU(ctx, pts); err != nil {
		errs = append(errs, err)
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
	fmt.Fprintf(tw, "kind\tN\tticks/s (slowest sub)\tdelivered\tlost\tCPU s/M\tpub CPU-ns/tick\t+ns/extra sub\t\n")
	for _, p := range pts {
		v := p.ThroughputPerS
		note := ""
		if p.Err != "" {
			note = "  error: " + p.Err
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.3f\t%s\t%s\t%s\n", p.Kind, p.N, fmtRate(&v), p.Delivered, p.Lost, p.CPUPerMillion,
			fmtCPUNs(p.PubCPUNs), fmtCPUNs(p.ExtraSubCPUNs), note)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "pub CPU-ns/tick: the publisher thread's CPU per single-tick Publish with N lossy rings of 4096 slots, in process, no readers;")
	fmt.Fprintf(w, "+ns/extra sub: its slope from N=%d (target <= 15 ns)\n", fanOutPoints[0])
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

// Fan-out cost, in process: one ring.Writer (the publisher's hot path) on a
// real shm device with n lossy subscriber rings, connected through loopback
// queue pairs made as the product makes them (link.Open), and no readers,
// so the figure is the publisher's own CPU per tick (thread CPU time, not
// wall time: it does not depend on how many cores the host has, nor much on
// its load). The cost of each extra subscriber is the slope from 1 to n.

// fanOutCPUTicks is how many ticks each in-process measurement publishes,
// and fanOutCPURuns how many measurements fanOutCPU takes the least of.
// 100,000 ticks (2-10 ms) three times let one run's N=2 point land
// anywhere from 26 to 47 ns (BenchmarkFanOutCPU, nine rounds, load 2):
// one timer tick or migration is a tenth of such a run.
const (
	fanOutCPUTicks = 400_000
	fanOutCPURuns  = 5
)

// fanOutCPU returns the publisher's thread CPU ns per single-tick Publish
// of 64 bytes with n subscriber rings: the least of fanOutCPURuns runs.
func fanOutCPU(ctx context.Context, n int) (float64, error) {
	dev, err := shm.Open(shm.Config{HostID: "bench-fan-out"})
	if err != nil {
		return 0, err
	}
	var closers []io.Closer
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
		_ = dev.Close()
	}()
	// Queue pairs as the product makes them (link.Open with the writer's
	// and the responder's profiles: a CQ of its own per pair, each polled
	// by the writer), connected both ways on the one device.
	pair := func() (w, r link.Conn, err error) {
		if w, err = link.Open(dev, link.Writer); err != nil {
			return w, r, err
		}
		closers = append(closers, w)
		if r, err = link.Open(dev, link.Responder); err != nil {
			return w, r, err
		}
		closers = append(closers, r)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err = w.QP.Connect(cctx, r.QP.LocalEndpoint()); err != nil {
			return w, r, err
		}
		return w, r, r.QP.Connect(cctx, w.QP.LocalEndpoint())
	}
	home, err := ring.NewHome(dev, ring.HomeConfig{SlotSize: tbSlotSize(64)}) // the cross-process runs' journal slot (tickbus.go)
	if err != nil {
		return 0, err
	}
	closers = append(closers, home)
	hw, _, err := pair()
	if err != nil {
		return 0, err
	}
	// The home is this process's and the writer its only publisher, as
	// a lone publisher's is in the product (solo claims).
	w, err := ring.NewWriter(ring.WriterConfig{Device: dev, CQ: hw.CQ, HomeQP: hw.QP, Home: home.Desc(), SoloHome: home, Timeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	closers = append(closers, w)
	for i := 0; i < n; i++ {
		tw, tr, err := pair()
		if err != nil {
			return 0, err
		}
		// The ring the cross-process runs' subscribers have (WithRing in
		// tickbus.go; the library's default too, the CLI's config has
		// 16384): 4096 slots of 96 bytes (tbSlotSize(64)).
		r, err := ring.NewRing(dev, ring.RingConfig{Slots: DefaultRingSlots, SlotSize: tbSlotSize(64), Mode: ring.Lossy, CQ: tr.CQ})
		if err != nil {
			return 0, err
		}
		closers = append(closers, r)
		if _, err := w.AddTarget(ring.Target{ID: uint64(i), QP: tw.QP, CQ: tw.CQ, Ring: r.Desc()}); err != nil {
			return 0, err
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	payload := make([]byte, 64)
	publish := func(k int) error {
		for i := 0; i < k; i++ {
			if _, err := w.Publish(1, payload, int64(i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := publish(1 << 15); err != nil { // warm: every slot touched twice
		return 0, err
	}
	best := 0.0
	for run := 0; run < fanOutCPURuns && ctx.Err() == nil; run++ {
		c0, err := threadCPU()
		if err != nil {
			return 0, err
		}
		if err := publish(fanOutCPUTicks); err != nil {
			return 0, err
		}
		c1, err := threadCPU()
		if err != nil {
			return 0, err
		}
		if ns := float64(c1-c0) / fanOutCPUTicks; best == 0 || ns < best {
			best = ns
		}
	}
	return best, ctx.Err()
}

// threadCPU is the calling thread's CPU time.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("bench: thread CPU clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// addFanOutCPU measures fanOutCPU for every fan-out point of pts and sets
// their PubCPUNs and, from the first point, ExtraSubCPUNs.
func addFanOutCPU(ctx context.Context, pts []ScalePoint) error {
	var errs []error
	first, firstNs := 0, 0.0
	for i := range pts {
		p := &pts[i]
		if p.Kind != ScaleFanOut || ctx.Err() != nil {
			continue
		}
		ns, err := fanOutCPU(ctx, p.N)
		if err != nil {
			errs = append(errs, fmt.Errorf("fan-out %d in process: %w", p.N, err))
			continue
		}
		p.PubCPUNs = ns
		if first == 0 {
			first, firstNs = p.N, ns
		} else if p.N > first {
			p.ExtraSubCPUNs = (ns - firstNs) / float64(p.N-first)
		}
	}
	return errors.Join(errs...)
}

// fmtCPUNs prints a CPU-ns figure, "-" when not measured.
func fmtCPUNs(ns float64) string {
	if ns == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", ns)
}
