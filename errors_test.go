package tickbus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// Every error a user can meet from the packages below maps to one of this
// package's sentinels, wrapped as the packages wrap them, with the chain
// kept (errors.Is finds the original too).
func TestErrors_EveryErrorBelowMapsToItsSentinel(t *testing.T) {
	for _, tc := range []struct{ from, to error }{
		{bus.ErrInvalidConfig, tickbus.ErrInvalidOption},
		{publisher.ErrInvalidConfig, tickbus.ErrInvalidOption},
		{subscriber.ErrInvalidConfig, tickbus.ErrInvalidOption},
		{ring.ErrInvalidConfig, tickbus.ErrInvalidOption},
		{link.ErrInvalidProfile, tickbus.ErrInvalidOption},
		{link.ErrUnsupported, tickbus.ErrInvalidOption},
		{bus.ErrConnect, tickbus.ErrConnect},
		{bus.ErrNoJetStream, tickbus.ErrNoJetStream},
		{bus.ErrForbidden, tickbus.ErrForbidden},
		{bus.ErrIdentity, tickbus.ErrForbidden},
		{bus.ErrUnauthenticated, tickbus.ErrForbidden},
		{bus.ErrReplayed, tickbus.ErrForbidden},
		{bus.ErrDuplicate, tickbus.ErrDuplicate},
		{bus.ErrConnectRefused, tickbus.ErrRefused},
		{subscriber.ErrRefused, tickbus.ErrRefused},
		{publisher.ErrMixedProviders, tickbus.ErrRefused},
		{publisher.ErrNoHome, tickbus.ErrNoHome},
		{ring.ErrFenced, tickbus.ErrNoHome},
		{ring.ErrHomeFailed, tickbus.ErrNoHome},
		{bus.ErrNoHome, tickbus.ErrNoHome},
		{bus.ErrUnknownTarget, tickbus.ErrNoHome},
		{bus.ErrNoPeer, tickbus.ErrNoHome},
		{publisher.ErrTooLarge, tickbus.ErrTooLarge},
		{ring.ErrPayloadTooLarge, tickbus.ErrTooLarge},
		{ring.ErrBatchTooLarge, tickbus.ErrBatchTooLarge},
		{tick.ErrInvalid, tickbus.ErrInvalidTick},
		{tick.ErrMalformed, tickbus.ErrInvalidTick},
		{ring.ErrLost, tickbus.ErrLost},
		{ring.ErrInvalidSequence, tickbus.ErrInvalidSequence},
		{ring.ErrBackPressure, tickbus.ErrBackPressure},
		{ring.ErrTimeout, tickbus.ErrTimeout},
		{publisher.ErrClosed, tickbus.ErrClosed},
		{subscriber.ErrClosed, tickbus.ErrClosed},
		{subscriber.ErrPollBusy, tickbus.ErrPollBusy},
		{ring.ErrClosed, tickbus.ErrClosed},
		{link.ErrClosed, tickbus.ErrClosed},
		{bus.ErrClosed, tickbus.ErrClosed},
	} {
		err := tickbus.Wrap(fmt.Errorf("publisher: context: %w", tc.from))
		assert.ErrorIs(t, err, tc.to, "%v", tc.from)
		assert.ErrorIs(t, err, tc.from, "the chain is kept")
		assert.Regexp(t, "^tickbus: ", err.Error())
	}
	other := errors.New("disk on fire")
	err := tickbus.Wrap(other)
	assert.ErrorIs(t, err, other)
	assert.Equal(t, "tickbus: disk on fire", err.Error(), "no kind: prefixed only")
	assert.NoError(t, tickbus.Wrap(nil))
}

// A publish's errors come back as the sentinels themselves, unwrapped and
// without allocating: the hot path.
func TestErrors_PublishErrorsAreTheSentinelsWithoutAllocating(t *testing.T) {
	for _, tc := range []struct{ from, to error }{
		{publisher.ErrNoHome, tickbus.ErrNoHome},
		{ring.ErrFenced, tickbus.ErrNoHome},
		{ring.ErrHomeFailed, tickbus.ErrNoHome},
		{publisher.ErrTooLarge, tickbus.ErrTooLarge},
		{ring.ErrPayloadTooLarge, tickbus.ErrTooLarge},
		{ring.ErrBatchTooLarge, tickbus.ErrBatchTooLarge},
		{ring.ErrLost, tickbus.ErrLost},
		{ring.ErrInvalidSequence, tickbus.ErrInvalidSequence},
		{ring.ErrBackPressure, tickbus.ErrBackPressure},
		{ring.ErrTimeout, tickbus.ErrTimeout},
		{ring.ErrClosed, tickbus.ErrClosed},
		{publisher.ErrClosed, tickbus.ErrClosed},
	} {
		var got error
		allocs := testing.AllocsPerRun(100, func() { got = tickbus.PubErr(tc.from) })
		assert.Equal(t, tc.to, got, "%v", tc.from)
		assert.Zero(t, allocs, "%v", tc.from)
	}
}

// A NATS server without JetStream: the client connects (the control
// plane needs only NATS), and the first publisher, which needs the topic's
// home elected in JetStream, fails with ErrNoJetStream.
func TestPublisher_ServerWithoutJetStream_IsErrNoJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go srv.Start()
	defer srv.Shutdown()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx, tickbus.WithNATS(srv.ClientURL()), tickbus.WithConnectTimeout(5*time.Second))
	require.NoError(t, err)
	defer c.Close()
	p, err := c.Publisher("nojs")
	assert.Nil(t, p)
	require.ErrorIs(t, err, tickbus.ErrNoJetStream)
	assert.ErrorIs(t, err, bus.ErrNoJetStream)
}

// Two publishers of one topic under one name in one client.
func TestPublisher_SameNameTwice_IsErrDuplicate(t *testing.T) {
	c := connect(t)
	p, err := c.Publisher("dup", tickbus.WithPublisherName("feed"))
	require.NoError(t, err)
	defer p.Close()
	q, err := c.Publisher("dup", tickbus.WithPublisherName("feed"))
	assert.Nil(t, q)
	require.ErrorIs(t, err, tickbus.ErrDuplicate)
	q, err = c.Publisher("dup", tickbus.WithPublisherName("feed-b"))
	require.NoError(t, err, "another name is fine")
	require.NoError(t, q.Close())
}

// The kinds of Event, as a handler prints them.
func ExampleEventKind() {
	for _, k := range []tickbus.EventKind{tickbus.EventGap, tickbus.EventOverrun, tickbus.EventCorrupt,
		tickbus.EventSkip, tickbus.EventEpoch, tickbus.EventJoin} {
		fmt.Println(k)
	}
	// Output:
	// gap
	// overrun
	// corrupt
	// skip
	// epoch
	// join
}

// A feed handler that knows its exchange's sequence numbers publishes at
// them; sequences its feed never had are declared missing, and every
// subscriber is told: an EventSkip, never a silent hole.
func ExamplePublisher_PublishAt() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	out := make(chan string, 8)
	_, err = c.Subscribe("exchange", tickbus.HandlerFuncs{
		Messages: func(msgs []tickbus.Message) {
			for _, m := range msgs {
				out <- fmt.Sprint("got ", m.Seq)
			}
		},
		Events: func(ev tickbus.Event) { out <- fmt.Sprint(ev.Kind, " ", ev.From, "..", ev.To) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	pub, err := c.Publisher("exchange")
	if err == nil {
		err = pub.WaitSubscribers(ctx, 1)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, seq := range []uint64{1, 2, 5} { // the feed never had 3 and 4
		if _, err := pub.PublishAt(seq, 1, []byte("x"), time.Now().UnixNano()); err != nil {
			fmt.Println(err)
			return
		}
	}
	for range 4 {
		fmt.Println(<-out)
	}
	// Output:
	// got 1
	// got 2
	// skip 3..4
	// got 5
}

// How a trading engine tells its losses apart: what it must act on (a
// gap, an overrun or a corrupt slot: its book may be wrong), what its feed
// never had (skip), and what was never this ring's (a home's failover, a
// publisher joining). Compiled, not run: the events need a failure.
func Example_events() {
	h := tickbus.HandlerFuncs{
		Events: func(ev tickbus.Event) {
			switch ev.Kind {
			case tickbus.EventGap, tickbus.EventOverrun, tickbus.EventCorrupt:
				fmt.Printf("lost %d ticks (%v %d..%d): rebuild the book from a snapshot\n", ev.Count(), ev.Kind, ev.From, ev.To)
			case tickbus.EventSkip:
				fmt.Printf("the feed never had %d..%d\n", ev.From, ev.To)
			case tickbus.EventEpoch:
				fmt.Printf("the topic's home failed over; the stream goes on at %d\n", ev.To+1)
			case tickbus.EventJoin:
				fmt.Printf("%d ticks published while a publisher joined\n", ev.Count())
			}
		},
	}
	_ = h
}
