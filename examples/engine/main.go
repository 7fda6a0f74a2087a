// Command engine is the shape of a trading engine on tickbus: it keeps a
// top of book (best bid, best ask, last trade) per instrument from a
// topic's ticks, stops trusting the books it may have missed updates for
// when the bus reports lost sequences (a gap, an overrun, a skip, a
// corrupt slot) or a failover of the topic's home, and prints its own
// tick-to-book latency every second.
//
//	go run ./engine -nats nats://127.0.0.1:4222
//
// It polls on its own goroutine (Client.Run, pinned to an OS thread): the
// handler is called once per batch with zero-copy views, and allocates
// nothing once every instrument has a book.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus"
)

// book is one instrument's top of book.
type book struct {
	bid, ask, last int64
	bidSize        uint64
	askSize        uint64
	stale          bool // a lost sequence may have held an update: wait for fresh quotes
	updates        uint64
}

type engine struct {
	books    map[uint64]*book
	lat      *hdrhistogram.Histogram // tick publish time to book updated, ns
	t        tickbus.Tick
	next     time.Time
	lost     uint64
	failover uint64
}

func (e *engine) OnMessages(msgs []tickbus.Message) {
	for i := range msgs {
		if tickbus.DecodeTick(&msgs[i], &e.t) != nil {
			continue // another message type on the topic
		}
		b := e.books[e.t.Instrument]
		if b == nil {
			b = &book{}
			e.books[e.t.Instrument] = b
		}
		switch e.t.Kind {
		case tickbus.Bid:
			b.bid, b.bidSize = e.t.Price, e.t.Size
		case tickbus.Ask:
			b.ask, b.askSize = e.t.Price, e.t.Size
		case tickbus.Trade:
			b.last = e.t.Price
		}
		if b.stale && b.bid != 0 && b.ask != 0 && e.t.Kind != tickbus.Trade {
			b.stale = false // a fresh quote on the side that moved; good enough for this sketch
		}
		b.updates++
	}
	now := time.Now()
	if n := len(msgs); n > 0 {
		_ = e.lat.RecordValue(max(1, now.UnixNano()-msgs[n-1].PublishNs))
	}
	if now.After(e.next) {
		e.print(now)
	}
}

func (e *engine) OnEvent(ev tickbus.Event) {
	switch ev.Kind {
	case tickbus.EventGap, tickbus.EventOverrun, tickbus.EventSkip, tickbus.EventCorrupt:
		// Any instrument could have been in the lost range: every book is
		// stale until its quotes are fresh again.
		e.lost += ev.Count()
		for _, b := range e.books {
			b.stale = true
		}
		fmt.Printf("engine: lost %d sequences (%v); all books stale until fresh quotes\n", ev.Count(), ev)
	default:
		// A new home took over the topic (failover): the old home's unused
		// range is reported once; sequences go on from the new epoch.
		e.failover++
		fmt.Printf("engine: %v: the topic's home changed; books kept, sequence continues\n", ev)
	}
}

func (e *engine) print(now time.Time) {
	stale := 0
	for _, b := range e.books {
		if b.stale {
			stale++
		}
	}
	fmt.Printf("engine: %d books (%d stale), lost %d, failovers %d, tick-to-book p50=%v p99=%v p99.9=%v max=%v\n",
		len(e.books), stale, e.lost, e.failover,
		time.Duration(e.lat.ValueAtQuantile(50)), time.Duration(e.lat.ValueAtQuantile(99)),
		time.Duration(e.lat.ValueAtQuantile(99.9)), time.Duration(e.lat.Max()))
	for id, b := range e.books {
		if id <= 3 {
			fmt.Printf("  %d: %d x %.2f  @  %.2f x %d  last %.2f\n", id, b.bidSize, tickbus.PriceFloat(b.bid),
				tickbus.PriceFloat(b.ask), b.askSize, tickbus.PriceFloat(b.last))
		}
	}
	e.lat.Reset()
	e.next = now.Add(time.Second)
}

func main() {
	natsURL := flag.String("nats", "nats://127.0.0.1:4222", "NATS URL of the bus")
	topic := flag.String("topic", "demo", "topic to trade on")
	dur := flag.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	c, err := tickbus.Connect(ctx, tickbus.WithNATS(*natsURL), tickbus.WithWaitForServer())
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
	defer c.Close()
	e := &engine{books: map[uint64]*book{}, lat: hdrhistogram.New(1, 10_000_000_000, 3), next: time.Now().Add(time.Second)}
	runtime.LockOSThread() // this goroutine is the poller
	if err := c.Run(ctx, *topic, e, tickbus.WithPollIdle(tickbus.Adaptive())); err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
}
