// Package tickbus is a market-data bus: publishers write ticks straight
// into their subscribers' ring buffers (one-sided RDMA-style writes over
// shared memory on one host, software RDMA over TCP across hosts), every
// tick of a topic gets one global sequence number, and NATS carries only
// the control plane. This package is what a feed handler or a trading
// engine imports:
//
//	c, err := tickbus.Connect(ctx, tickbus.WithNATS("nats://127.0.0.1:4222"))
//	err = c.Publish("demo", &tickbus.Tick{Instrument: 1, Kind: tickbus.Trade, Price: tickbus.PriceFromFloat(100.25), Size: 5})
//	pub, err := c.Publisher("demo") // one of your own: no lock, batches, PublishAt
//	seq, err := pub.PublishTick(&tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: tickbus.PriceFromFloat(100.25), Size: 5})
//	sub, err := c.Subscribe("demo", tickbus.OnTick(func(t *tickbus.Tick) { ... }))
//
// Without WithNATS, Connect runs an embedded NATS server on a random
// loopback port; Client.URL names it for other processes. Client.Publish
// keeps one publisher per topic, as nats.go's Conn.Publish needs none;
// WithRate paces a publisher from each tick's intended send time.
//
// Delivery: a Handler's OnMessages gets each batch of consecutive messages
// as zero-copy views (valid until it returns), in sequence order, on the
// subscription's own polling goroutine; OnEvent gets every range of
// sequences not delivered (EventGap, EventOverrun, EventSkip,
// EventCorrupt, EventEpoch at a home's failover, EventJoin while a
// publisher joins): every sequence is delivered once or named by one event.
// OnTick and HandlerFuncs build a Handler from functions. Client.Run polls
// on the caller's goroutine instead (the Aeron way: the caller owns, and
// may pin, the polling thread); WithManualPoll and Subscription.Poll fit
// the ring into a loop of your own.
//
// Errors are this package's sentinels (ErrInvalidOption, ErrConnect,
// ErrClosed, ErrTooLarge, ErrLost, ErrNoHome (retryable), ErrForbidden,
// ...), tested with errors.Is, whichever layer raised them. Publish returns them unwrapped and allocates nothing.
//
// Close releases everything, on Client, Publisher and Subscription alike;
// closing the Client closes what it made.
//
// The packages below (publisher, subscriber, bus, ring, rdma, link, stats)
// stay public for programs that need their knobs; the examples/ module
// shows whole programs through this package only.
package tickbus
