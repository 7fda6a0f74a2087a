package tickbus_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus"
)

// Connect runs an embedded NATS server unless WithNATS names one; other
// processes join with tickbus.WithNATS(c.URL()).
func ExampleConnect() {
	c, err := tickbus.Connect(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("connected:", c.URL() != "")

	_, err = tickbus.Connect(context.Background(), tickbus.WithProvider("carrier-pigeon"))
	fmt.Println(errors.Is(err, tickbus.ErrInvalidOption))
	// Output:
	// connected: true
	// true
}

// The first publisher of a topic becomes its home (it holds the sequence
// counter); every message gets the topic's next sequence.
func ExampleClient_Publisher() {
	c, err := tickbus.Connect(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	pub, err := c.Publisher("quotes")
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 3 {
		seq, err := pub.PublishTick(&tickbus.Tick{Instrument: 7, Kind: tickbus.Bid, Price: 100_0000 + int64(i), Size: 10})
		fmt.Println(seq, err)
	}
	_, err = pub.Publish(1, make([]byte, pub.MaxPayload()+1))
	fmt.Println(err == tickbus.ErrTooLarge)
	// Output:
	// 1 <nil>
	// 2 <nil>
	// 3 <nil>
	// true
}

// OnTick decodes every tick; the handler runs on the subscription's own
// polling goroutine.
func ExampleClient_Subscribe() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	got := make(chan tickbus.Tick, 16)
	sub, err := c.Subscribe("quotes", tickbus.OnTick(func(t *tickbus.Tick) { got <- *t }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()

	pub, err := c.Publisher("quotes")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	for _, px := range []int64{100_0000, 100_0100, 99_9900} {
		if _, err := pub.PublishTick(&tickbus.Tick{Instrument: 7, Kind: tickbus.Trade, Price: px, Size: 10}); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 3 {
		t := <-got
		fmt.Println(t.Instrument, t.Kind, t.Price, t.Size)
	}
	// Output:
	// 7 trade 1000000 10
	// 7 trade 1000100 10
	// 7 trade 999900 10
}

// A batch handler gets consecutive messages at once as zero-copy views:
// the payloads are valid only during the call.
func ExampleHandlerFuncs() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	seqs := make(chan uint64, 64)
	sub, err := c.Subscribe("orders", tickbus.HandlerFuncs{
		Messages: func(msgs []tickbus.Message) {
			for _, m := range msgs {
				seqs <- m.Seq // m.Payload dies when this call returns
			}
		},
		Events: func(ev tickbus.Event) { fmt.Println("lost", ev) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	pub, err := c.Publisher("orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	batch := make([]tickbus.Message, 4)
	for i := range batch {
		batch[i] = tickbus.Message{Type: 1, PublishNs: time.Now().UnixNano(), Payload: []byte("order")}
	}
	first, err := pub.PublishBatch(batch)
	fmt.Println("first", first, err)
	for range batch {
		fmt.Print(<-seqs, " ")
	}
	fmt.Println()
	// Output:
	// first 1 <nil>
	// 1 2 3 4
}

// Every sequence is delivered once or named by an event: a lossy ring
// that falls a lap behind reports the overwritten range as an overrun.
func ExampleEvent() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	first, release := make(chan struct{}), make(chan struct{})
	out := make(chan string, 64)
	blocked := false
	sub, err := c.Subscribe("fast", tickbus.HandlerFuncs{
		Messages: func(msgs []tickbus.Message) {
			for _, m := range msgs {
				out <- fmt.Sprint("got ", m.Seq)
			}
			if !blocked { // hold the poller after the first batch, so the ring laps
				blocked = true
				close(first)
				<-release
			}
		},
		Events: func(ev tickbus.Event) { out <- fmt.Sprint(ev.Kind, " ", ev.From, "..", ev.To) },
	}, tickbus.WithRing(8, 128))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	// a journal no deeper than the ring: what the ring lost, the journal
	// (on by default, 4096 deep) would otherwise give back
	pub, err := c.Publisher("fast", tickbus.WithJournal(8))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := pub.WaitSubscribers(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	msg := []byte("x")
	_, _ = pub.Publish(1, msg)
	<-first
	for range 20 { // 2..21 into 8 slots: 2..13 are overwritten
		_, _ = pub.Publish(1, msg)
	}
	close(release)
	for s := ""; s != "got 21"; {
		s = <-out
		fmt.Println(s)
	}
	// Output:
	// got 1
	// overrun 2..13
	// got 14
	// got 15
	// got 16
	// got 17
	// got 18
	// got 19
	// got 20
	// got 21
}

// Run polls on the calling goroutine, the Aeron way: the caller owns the
// polling thread (pin it with runtime.LockOSThread). It returns when ctx
// ends, after the ring is drained.
func ExampleClient_Run() {
	c, err := tickbus.Connect(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // a publisher elsewhere
		pub, err := c.Publisher("run")
		if err != nil {
			fmt.Println(err)
			cancel()
			return
		}
		_ = pub.WaitSubscribers(ctx, 1)
		for i := range 3 {
			_, _ = pub.PublishTick(&tickbus.Tick{Instrument: uint64(i + 1), Kind: tickbus.Ask, Price: 5, Size: 1})
		}
	}()
	n := 0
	err = c.Run(ctx, "run", tickbus.OnTick(func(t *tickbus.Tick) {
		fmt.Println("instrument", t.Instrument, t.Kind)
		if n++; n == 3 {
			cancel()
		}
	}))
	fmt.Println("run:", err)
	// Output:
	// instrument 1 ask
	// instrument 2 ask
	// instrument 3 ask
	// run: <nil>
}
