package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// phase is the outcome of one run of a case.
type phase struct {
	hist       *hdrhistogram.Histogram // latency or round trip, nil in throughput runs
	delivered  int64                   // ticks delivered, summed over subscribers
	lost       int64                   // sequences skipped, summed over subscribers
	sent       int64                   // ticks sent, summed over publishers
	unsent     int64                   // paced ticks a publisher never sent (it fell behind)
	throughput float64                 // ticks/s, the slowest subscriber's
	cpu        time.Duration           // user+system of every process of the run
	cores      int                     // hot threads the run used
}

// pairSpec is one run of publisher and subscriber child processes.
type pairSpec struct {
	transport string
	mode      string
	pubs      int
	subs      int
	batch     int
	duration  time.Duration
	url       string
	files     []*os.File
}

// runPair starts the subscribers, waits until each is ready, starts the
// publishers, and collects every report. Every process is stopped (and
// killed if it hangs) before it returns.
func runPair(ctx context.Context, cfg Config, s pairSpec) (ph phase, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.duration+grace+30*time.Second)
	defer cancel()
	cpuOf := func(k int) int {
		if len(cfg.CPUs) == 0 {
			return -1
		}
		return cfg.CPUs[k%len(cfg.CPUs)]
	}
	base := roleArgs{
		transport: s.transport, mode: s.mode, rate: cfg.Rate, duration: s.duration,
		size: cfg.Size, batch: s.batch, idle: cfg.Idle, url: s.url,
		ringMode: cfg.RingMode, slots: cfg.RingSlots, claim: cfg.Claim, pubs: s.pubs, subs: s.subs,
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			_, serr := p.stop(childExitWait)
			if serr != nil && err == nil {
				err = serr
			}
		}
	}()
	var subs, pubs []*proc
	for j := 0; j < s.subs; j++ {
		a := base
		a.index, a.peers, a.cpu = j, s.pubs, cpuOf(s.pubs+j)
		a.pprof, a.trace = profilePath(cfg, a, "sub"), tracePath(cfg, a, "sub")
		p, err := startProc(ctx, fmt.Sprintf("%s sub %d", s.transport, j), roleSub, a.argv(), s.files)
		if err != nil {
			return ph, err
		}
		procs = append(procs, p)
		subs = append(subs, p)
		if _, err := p.ready(ctx); err != nil {
			return ph, err
		}
	}
	for i := 0; i < s.pubs; i++ {
		a := base
		a.index, a.peers, a.cpu = i, s.subs, cpuOf(i)
		a.pprof, a.trace = profilePath(cfg, a, "pub"), tracePath(cfg, a, "pub")
		p, err := startProc(ctx, fmt.Sprintf("%s pub %d", s.transport, i), rolePub, a.argv(), s.files)
		if err != nil {
			return ph, err
		}
		procs = append(procs, p)
		pubs = append(pubs, p)
		if _, err := p.ready(ctx); err != nil {
			return ph, err
		}
	}
	ph.cores = s.pubs + s.subs
	return collect(ctx, ph, pubs, subs, s.mode, s.transport, func() {
		for _, p := range subs {
			_ = p.send("stop") // every publisher is done; a subscriber that already ended reads nothing
		}
	})
}

// childExitWait is how long a child that has reported may take to exit
// once its stdin closes before it is killed (an error). A child exits in
// milliseconds; under -race on a loaded 2-core host one floor subscriber
// took over 3 s (TestRun_PingPong_MeasuresRoundTrips, load 14-18).
const childExitWait = 15 * time.Second

// collect waits for every publisher's and subscriber's final report and
// sums them into ph.
//
// afterPubs, if set, runs once every publisher has reported.
func collect(ctx context.Context, ph phase, pubs, subs []*proc, mode, name string, afterPubs func()) (phase, error) {
	start := int64(math.MaxInt64)
	var errs []error
	for _, p := range pubs {
		r, err := p.done(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ph.sent += r.Sent
		ph.unsent += r.Unsent
		ph.cpu += time.Duration(r.CPUNs)
		start = min(start, r.StartNs)
		if r.hist != nil && mode != modeThroughput {
			ph.hist = mergeHist(ph.hist, r.hist) // round trips, or unsent ticks' lower bounds
		}
	}
	if afterPubs != nil {
		afterPubs()
	}
	ph.throughput = math.Inf(1)
	for _, p := range subs {
		r, err := p.done(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ph.delivered += r.Count
		ph.lost += r.Lost
		ph.cpu += time.Duration(r.CPUNs)
		if mode == modeLatency && r.hist != nil {
			ph.hist = mergeHist(ph.hist, r.hist)
		}
		if mode == modeThroughput {
			tp := 0.0
			if r.Count > 0 && r.LastNs > start {
				tp = float64(r.Count) / (float64(r.LastNs-start) / 1e9)
			}
			ph.throughput = min(ph.throughput, tp)
		}
	}
	if math.IsInf(ph.throughput, 1) {
		ph.throughput = 0
	}
	if len(errs) > 0 {
		return ph, errors.Join(errs...)
	}
	if mode != modeThroughput && (ph.hist == nil || ph.hist.TotalCount() == 0) {
		return ph, fmt.Errorf("bench: %s: no latency recorded", name)
	}
	return ph, nil
}

func mergeHist(into, from *hdrhistogram.Histogram) *hdrhistogram.Histogram {
	if into == nil {
		into = newHist()
	}
	into.Merge(from)
	return into
}
