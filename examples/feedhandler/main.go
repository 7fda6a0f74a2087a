// Command feedhandler publishes a synthetic market-data feed on a tickbus
// topic at a steady rate, every tick stamped with its intended send time
// (so subscribers' latency includes any stall of this publisher), and
// prints what it published every second.
//
//	go run ./feedhandler -listen 127.0.0.1:4222 -rate 10000
//
// Without -nats it runs the bus's NATS server itself on -listen; the
// engine and the probe connect to it with -nats nats://127.0.0.1:4222.
// Run two with -line a and -line b (same -seed) for redundant feed lines:
// each exchange sequence is published once, by whichever line is first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/tickbus/tickbus"
)

func main() {
	natsURL := flag.String("nats", "", "NATS URL to join (default: run an embedded server on -listen)")
	listen := flag.String("listen", "127.0.0.1:4222", "embedded NATS server address")
	topic := flag.String("topic", "demo", "topic to publish on")
	rate := flag.Float64("rate", 1000, "ticks per second (0: as fast as possible)")
	dur := flag.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	line := flag.String("line", "", "feed line a or b: publish at the exchange sequence, first line wins")
	seed := flag.Uint64("seed", 1, "feed seed (two lines need the same)")
	flag.Parse()
	if err := run(*natsURL, *listen, *topic, *rate, *dur, *line, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "feedhandler:", err)
		os.Exit(1)
	}
}

func run(natsURL, listen, topic string, rate float64, dur time.Duration, line string, seed uint64) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	opt := tickbus.WithEmbeddedNATS(listen)
	if natsURL != "" {
		opt = tickbus.WithNATS(natsURL)
	}
	c, err := tickbus.Connect(ctx, opt, tickbus.WithNodeID("feedhandler"+line))
	if err != nil {
		return err
	}
	defer c.Close()
	pub, err := c.Publisher(topic)
	if err != nil {
		return err
	}
	cfg := tickbus.DefaultFeedConfig()
	cfg.Seed = seed
	feed, err := tickbus.NewFeed(cfg)
	if err != nil {
		return err
	}
	pacer, err := tickbus.NewPacer(rate)
	if err != nil {
		return err
	}
	fmt.Printf("feedhandler: publishing %s at %.0f/s on %s (home here: %t)\n", topic, rate, c.URL(), pub.IsHome())

	var (
		t                 tickbus.Tick
		published, lost   uint64
		idle              = tickbus.Yield()
		stopped           = func() bool { return ctx.Err() != nil }
		report            = time.NewTicker(time.Second)
		lastPub, lastLost uint64
	)
	defer report.Stop()
	for {
		intended, ok := pacer.Wait(idle, stopped)
		if !ok {
			break
		}
		feed.Next(&t, intended)
		t.PubTime = intended
		if line == "" {
			_, err = pub.PublishTick(&t)
		} else {
			// Redundant lines: the exchange sequence is the bus sequence,
			// so the first line to publish it wins, the other drops its copy.
			_, err = pub.PublishTickAt(t.ExchSeq, &t)
		}
		switch {
		case err == nil:
			published++
		case errors.Is(err, tickbus.ErrLost):
			lost++
		default:
			return fmt.Errorf("after %d ticks: %w", published, err)
		}
		select {
		case <-report.C:
			fmt.Printf("feedhandler: %d/s published, %d/s lost to the other line, %d subscribers, %v behind schedule\n",
				published-lastPub, lost-lastLost, pub.Subscribers(), pacer.Behind().Round(time.Microsecond))
			lastPub, lastLost = published, lost
		default:
		}
	}
	fmt.Printf("feedhandler: %d published, %d lost to the other line\n", published, lost)
	return pub.Close()
}
