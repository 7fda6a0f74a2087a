package tickbus

import (
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// Message is one sequenced message as a subscriber receives it: the
// topic's sequence number, the publish time, the type, the publisher's id
// and a zero-copy view of the payload, valid only until the handler call
// that got it returns (copy what you keep).
type Message = ring.Tick

// Tick is a market-data tick (trade, bid or ask of one instrument at one
// venue), the payload of a TickType message. Decode one with DecodeTick.
type Tick = tick.Tick

// TickType is the message type of an encoded Tick.
const TickType = tick.MessageType

// Event names sequences a subscriber did not receive: Kind, and the range
// From..To (Count of them). Every sequence is delivered once or named by
// one event; nothing is lost in silence.
type Event = ring.Event

// EventKind says why sequences were not delivered.
type EventKind = ring.EventKind

// The kinds of Event.
const (
	// EventGap: claimed by a publisher but never written (it died, or the
	// write was lost) within the gap timeout.
	EventGap = ring.EventGap
	// EventOverrun: overwritten before they were read (a lossy ring that
	// fell a lap behind).
	EventOverrun = ring.EventOverrun
	// EventCorrupt: a slot failed its checks.
	EventCorrupt = ring.EventCorrupt
	// EventSkip: declared missing by a publisher (PublishAt past the
	// topic's counter: its feed never had them).
	EventSkip = ring.EventSkip
	// EventEpoch: the topic's home failed over; the sequences were the old
	// home's reservation and were never delivered here (most were never
	// handed out). The new epoch starts at To+1. One event for the range.
	EventEpoch = ring.EventEpoch
	// EventJoin: published while a publisher was still joining this
	// subscription (before it wrote into its ring): never this ring's to
	// receive, named rather than hidden.
	EventJoin = ring.EventJoin
)

// Counters are a subscription's totals, in sequences.
type Counters = subscriber.Counters

// PublisherStats are a publisher's counters.
type PublisherStats = ring.WriterStats

// Stats is one interval's statistics of a subscription: counters, rate
// and the latency histogram (Stats.LatencyHistogram).
type Stats = stats.Message

// PriceScale is the units of a Tick's Price per currency unit (Price is
// fixed-point: 100.25 is 100.25 * PriceScale).
const PriceScale = tick.PriceScale

// PriceFromFloat converts a price in currency units to a Tick's Price.
func PriceFromFloat(f float64) int64 { return tick.PriceFromFloat(f) }

// PriceFloat converts a Tick's Price to currency units.
func PriceFloat(p int64) float64 { return tick.PriceFloat(p) }

// Kind of a Tick: Trade, Bid or Ask.
type Kind = tick.Kind

// The kinds of Tick.
const (
	Trade = tick.Trade
	Bid   = tick.Bid
	Ask   = tick.Ask
)

// Handler receives a subscription's messages, on its polling goroutine, in
// sequence order: OnMessages once per batch of consecutive messages (the
// views die when it returns), OnEvent between batches for every range of
// sequences not delivered. Neither may block long: the ring fills.
type Handler interface {
	OnMessages(msgs []Message)
	OnEvent(ev Event)
}

// HandlerFuncs is a Handler of two functions; a nil one ignores what it
// would get (events are still counted in Subscription.Counters).
type HandlerFuncs struct {
	Messages func(msgs []Message)
	Events   func(ev Event)
}

// OnMessages calls h.Messages.
func (h HandlerFuncs) OnMessages(msgs []Message) {
	if h.Messages != nil {
		h.Messages(msgs)
	}
}

// OnEvent calls h.Events.
func (h HandlerFuncs) OnEvent(ev Event) {
	if h.Events != nil {
		h.Events(ev)
	}
}

// OnTick is a Handler that decodes every TickType message and calls f
// with it (t is reused: copy what you keep). Messages of other types, and
// events, are ignored here (and still counted); see HandlerFuncs to get
// them.
func OnTick(f func(t *Tick)) Handler { return &tickHandler{f: f} }

type tickHandler struct {
	f func(*Tick)
	t Tick
}

func (h *tickHandler) OnMessages(msgs []Message) {
	for i := range msgs {
		if DecodeTick(&msgs[i], &h.t) == nil {
			h.f(&h.t)
		}
	}
}

func (h *tickHandler) OnEvent(Event) {}

// DecodeTick decodes m's payload into t. It fails with ErrInvalidTick,
// leaving t unchanged, if m is not a well-formed TickType message. It
// allocates nothing.
func DecodeTick(m *Message, t *Tick) error {
	if m.Type != TickType {
		return errNotTick
	}
	if tick.Decode(m.Payload, t) != nil {
		return errMalformedTick
	}
	return nil
}

// Pre-built, so DecodeTick does not allocate.
var (
	errNotTick       = &wrapped{ErrInvalidTick, "tickbus: invalid tick: the message is not of TickType"}
	errMalformedTick = &wrapped{ErrInvalidTick, "tickbus: invalid tick: malformed payload"}
)

type wrapped struct {
	kind error
	msg  string
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.kind }

// Feed is a synthetic market-data feed (a random walk of bids, asks and
// trades over a set of instruments), for trying tickbus out.
type Feed = publisher.Feed

// FeedConfig configures a Feed.
type FeedConfig = publisher.FeedConfig

// NewFeed returns a synthetic feed; DefaultFeedConfig is a good start.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	f, err := publisher.NewFeed(cfg)
	return f, wrap(err)
}

// DefaultFeedConfig is 16 instruments around 100.00.
func DefaultFeedConfig() FeedConfig { return publisher.DefaultFeedConfig() }

// Pacer schedules sends at a fixed rate from their intended times, never
// from the last actual send: stamp each message with the intended time
// Wait returns (PublishStamped, or Tick.PubTime), so that a stalled
// publisher shows in the subscribers' latency (no coordinated omission).
type Pacer = publisher.Pacer

// NewPacer starts a schedule of rate sends per second from now (0: as
// fast as possible).
func NewPacer(rate float64) (*Pacer, error) {
	p, err := publisher.NewPacer(rate)
	return p, wrap(err)
}

// IdleStrategy is what a poller or a waiting publisher does when there is
// nothing to do: Adaptive, BusySpin, Yield or Backoff, or your own.
type IdleStrategy = rdma.IdleStrategy

// BusySpin never gives up the CPU: the lowest latency, a core per poller.
func BusySpin() IdleStrategy { return rdma.BusySpin{} }

// Yield gives the CPU to the scheduler between polls.
func Yield() IdleStrategy { return rdma.Yield{} }

// Adaptive spins after the last work for twice the recent gap between
// works (50 µs to 1 ms; letting other threads have the core every 64
// polls), yields until 1 ms, then parks up to 1 ms, and 4 ms after 1 s
// without work: a subscription's default. Microseconds while ticks flow,
// next to no CPU when idle.
func Adaptive() IdleStrategy { return rdma.NewAdaptive() }

// Backoff spins 10 polls, yields 5, then parks up to 1ms.
func Backoff() IdleStrategy { return rdma.NewBackoff() }
