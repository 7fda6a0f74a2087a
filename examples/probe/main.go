// Command probe measures tickbus's one-way latency: it publishes paced
// probe messages on a topic, each stamped with its intended send time,
// subscribes to the same topic, and prints p50, p99, p99.9 and max of
// receive time minus intended send time every second, and over the run.
//
//	go run ./probe -rate 10000 -duration 10s
//
// Without -nats it runs an embedded NATS server; -role pub or -role sub
// splits the probe over two processes (or hosts, whose clocks must then be
// synchronised) on one -nats server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus"
)

// recorder collects latencies on the polling goroutine; print reads them.
type recorder struct {
	mu            sync.Mutex
	interval, all *hdrhistogram.Histogram
	lost          uint64
}

func (r *recorder) OnMessages(msgs []tickbus.Message) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	for i := range msgs {
		d := max(1, now-msgs[i].PublishNs)
		_ = r.interval.RecordValue(d)
		_ = r.all.RecordValue(d)
	}
	r.mu.Unlock()
}

func (r *recorder) OnEvent(ev tickbus.Event) {
	r.mu.Lock()
	r.lost += ev.Count()
	r.mu.Unlock()
}

func line(h *hdrhistogram.Histogram) string {
	return fmt.Sprintf("n=%d p50=%v p99=%v p99.9=%v max=%v", h.TotalCount(),
		time.Duration(h.ValueAtQuantile(50)), time.Duration(h.ValueAtQuantile(99)),
		time.Duration(h.ValueAtQuantile(99.9)), time.Duration(h.Max()))
}

func main() {
	natsURL := flag.String("nats", "", "NATS URL (default: an embedded server)")
	topic := flag.String("topic", "probe", "topic")
	role := flag.String("role", "both", "both, pub or sub")
	rate := flag.Float64("rate", 1000, "probes per second")
	dur := flag.Duration("duration", 10*time.Second, "how long to probe")
	flag.Parse()
	if err := run(*natsURL, *topic, *role, *rate, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(natsURL, topic, role string, rate float64, dur time.Duration) error {
	if role != "both" && role != "pub" && role != "sub" {
		return fmt.Errorf("-role %q: want both, pub or sub", role)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var opts []tickbus.Option
	if natsURL != "" {
		opts = append(opts, tickbus.WithNATS(natsURL), tickbus.WithWaitForServer())
	}
	c, err := tickbus.Connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if natsURL == "" && role != "both" {
		fmt.Printf("probe: embedded NATS at %s\n", c.URL())
	}
	rec := &recorder{interval: hdrhistogram.New(1, 10_000_000_000, 3), all: hdrhistogram.New(1, 10_000_000_000, 3)}
	if role != "pub" {
		sub, err := c.Subscribe(topic, rec, tickbus.WithPollIdle(tickbus.BusySpin()), tickbus.WithLockOSThread())
		if err != nil {
			return err
		}
		defer sub.Close()
	}
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var done chan error
	if role != "sub" {
		done = make(chan error, 1)
		pub, err := c.Publisher(topic)
		if err != nil {
			return err
		}
		defer pub.Close()
		if err := pub.WaitSubscribers(ctx, 1); err != nil {
			return err
		}
		go func() { done <- probe(ctx, pub, rate) }()
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
loop:
	for {
		select {
		case err := <-done: // nil in the sub role: never ready
			if err != nil {
				return err
			}
			break loop
		case <-t.C:
			rec.mu.Lock()
			fmt.Println("probe:", line(rec.interval), "lost", rec.lost)
			rec.interval.Reset()
			rec.mu.Unlock()
		case <-ctx.Done():
			break loop
		}
	}
	time.Sleep(100 * time.Millisecond) // the last probes land
	rec.mu.Lock()
	defer rec.mu.Unlock()
	fmt.Println("probe: total", line(rec.all), "lost", rec.lost)
	return nil
}

// probe publishes at rate, each message stamped with its intended send
// time, until ctx ends.
func probe(ctx context.Context, pub *tickbus.Publisher, rate float64) error {
	pacer, err := tickbus.NewPacer(rate)
	if err != nil {
		return err
	}
	payload := make([]byte, 32)
	idle := tickbus.Yield()
	for {
		intended, ok := pacer.Wait(idle, func() bool { return ctx.Err() != nil })
		if !ok {
			return nil
		}
		if _, err := pub.PublishStamped(1, payload, intended); err != nil {
			return err
		}
	}
}
