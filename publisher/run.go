package publisher

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// FeedRun says how RunFeed drives a feed.
type FeedRun struct {
	// Rate in ticks per second; 0 publishes as fast as possible.
	Rate float64
	// Duration of the run; 0 runs until ctx ends.
	Duration time.Duration
	// Batch ticks per PublishBatch (1: Publish per tick).
	Batch int
	// Idle is the pacer's idle strategy near a send's due time (default
	// rdma.Yield{}).
	Idle rdma.IdleStrategy
}

// FeedResult is what a run published.
type FeedResult struct {
	Published   uint64        // ticks published
	First, Last uint64        // their first and last sequence (0 if none)
	Elapsed     time.Duration // from the first intended send to the end
	MaxBehind   time.Duration // the furthest the sender fell behind its schedule
	Retries     uint64        // publishes retried because the topic had no home (ErrNoHome)
	// Unpublished is the ticks the run ended with in hand: its end came
	// while they waited for a home (ErrNoHome). They have no sequence, so
	// no subscriber misses them; the run is not failed for them.
	Unpublished uint64
}

// Rate is ticks per second over the run.
func (r FeedResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Published) / r.Elapsed.Seconds()
}

// RunFeed publishes feed's ticks through p until run.Duration has passed
// or ctx ends, paced from intended send times (each tick's PubTime is its
// intended time, so latency includes any stall of the sender). An error
// from the publisher ends the run and is returned with what was published;
// ErrNoHome is retried until the run's end, which then ends it without an
// error (FeedResult.Unpublished counts the ticks held).
func RunFeed(ctx context.Context, p *Publisher, feed *Feed, run FeedRun) (FeedResult, error) {
	if run.Batch == 0 {
		run.Batch = 1
	}
	if run.Batch < 1 || run.Batch > p.cfg.MaxBatch {
		return FeedResult{}, fmt.Errorf("%w: batch %d, want 1..%d", ErrInvalidConfig, run.Batch, p.cfg.MaxBatch)
	}
	if run.Duration < 0 {
		return FeedResult{}, fmt.Errorf("%w: duration %v, want >= 0", ErrInvalidConfig, run.Duration)
	}
	if run.Idle == nil {
		run.Idle = rdma.Yield{}
	}
	pacer, err := NewPacer(run.Rate)
	if err != nil {
		return FeedResult{}, err
	}
	var stop atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		var timer <-chan time.Time
		if run.Duration > 0 {
			t := time.NewTimer(run.Duration)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ctx.Done():
		case <-timer:
		case <-done:
		}
		stop.Store(true)
	}()
	stopped := stop.Load
	var (
		res   FeedResult
		tk    tick.Tick
		start = time.Now()
		batch = make([]ring.Tick, run.Batch)
		bufs  = make([]byte, run.Batch*tick.Size)
	)
	for i := range batch {
		batch[i].Type = tick.MessageType
		batch[i].Payload = bufs[i*tick.Size : (i+1)*tick.Size]
	}
	for !stopped() {
		n := 0
		for n < run.Batch {
			intended, ok := pacer.Wait(run.Idle, stopped)
			if !ok {
				break
			}
			feed.Next(&tk, intended)
			tk.PubTime = intended
			if _, err := tick.Encode(batch[n].Payload, &tk); err != nil {
				return res, err // the feed makes only valid ticks: a bug
			}
			batch[n].PublishNs = intended
			n++
		}
		if n == 0 {
			break
		}
		var seq uint64
		for {
			if n == 1 {
				seq, err = p.Publish(tick.MessageType, batch[0].Payload, batch[0].PublishNs)
			} else {
				seq, err = p.PublishBatch(batch[:n])
			}
			// No home (a failover that outlasted FailoverTimeout): the same
			// ticks again, with their intended times, until one is elected
			// or the run ends. A publisher never exits because a home went.
			if err != ErrNoHome || stopped() {
				break
			}
			res.Retries++
		}
		if err == ErrNoHome { // stopped while no home answered: the run's end, not its failure
			res.Unpublished += uint64(n)
			break
		}
		if err != nil {
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("publisher: after %d ticks: %w", res.Published, err)
		}
		if res.First == 0 {
			res.First = seq
		}
		res.Last = seq + uint64(n) - 1
		res.Published += uint64(n)
		if res.Published&255 < uint64(n) { // about every 256 ticks: off the per-tick path
			if b := pacer.Behind(); b > res.MaxBehind {
				res.MaxBehind = b
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}
