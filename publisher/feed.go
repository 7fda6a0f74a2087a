package publisher

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tickbus/tickbus/tick"
)

// ErrInvalidConfig: a configuration value is out of range. The message names
// the field, the value and what was expected.
var ErrInvalidConfig = errors.New("publisher: invalid configuration")

// FeedConfig configures a synthetic feed: a set of instruments whose prices
// follow a random walk, emitting trades and best bid/ask quotes.
type FeedConfig struct {
	// Instruments is how many instruments the feed cycles through
	// (ids FirstInstrument .. FirstInstrument+Instruments-1).
	Instruments int
	// FirstInstrument is the lowest instrument id (default 1).
	FirstInstrument uint64
	// Venue is the MIC stamped on every tick ("" for none).
	Venue string
	// StartPrice is every instrument's first bid, in currency units.
	StartPrice float64
	// TickSize is the price step of the walk, in currency units.
	TickSize float64
	// TradeRatio is the fraction of ticks that are trades (0..1); the rest
	// are bid and ask quotes in equal parts.
	TradeRatio float64
	// Seed makes the feed reproducible; two feeds with one seed emit the
	// same ticks.
	Seed uint64
}

// DefaultFeedConfig is a small equity-like feed.
func DefaultFeedConfig() FeedConfig {
	return FeedConfig{
		Instruments: 8, FirstInstrument: 1, Venue: "XTBS",
		StartPrice: 100, TickSize: 0.01, TradeRatio: 0.2, Seed: 1,
	}
}

// Validate checks every field, naming the first bad one.
func (c FeedConfig) Validate() error {
	switch {
	case c.Instruments < 1 || c.Instruments > 1<<20:
		return fmt.Errorf("%w: instruments %d, want 1..%d", ErrInvalidConfig, c.Instruments, 1<<20)
	case c.FirstInstrument == 0:
		return fmt.Errorf("%w: first instrument id 0, want > 0", ErrInvalidConfig)
	case c.FirstInstrument > math.MaxUint64-uint64(c.Instruments):
		return fmt.Errorf("%w: first instrument id %d leaves no room for %d instruments", ErrInvalidConfig, c.FirstInstrument, c.Instruments)
	case !(c.TickSize > 0) || tick.PriceFromFloat(c.TickSize) < 1:
		return fmt.Errorf("%w: tick size %v, want at least %v", ErrInvalidConfig, c.TickSize, 1.0/tick.PriceScale)
	case !(c.StartPrice > 0) || c.StartPrice > 1e9:
		return fmt.Errorf("%w: start price %v, want > 0 and at most 1e9", ErrInvalidConfig, c.StartPrice)
	case !(c.TradeRatio >= 0 && c.TradeRatio <= 1):
		return fmt.Errorf("%w: trade ratio %v, want 0..1", ErrInvalidConfig, c.TradeRatio)
	}
	if _, err := tick.ParseVenue(c.Venue); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Feed generates synthetic ticks. It is not safe for concurrent use; Next
// allocates nothing.
type Feed struct {
	cfg      FeedConfig
	venue    tick.Venue
	step     int64   // tick size in price units
	bids     []int64 // current best bid per instrument
	rng      *rand.Rand
	next     int    // instrument index of the next tick
	seq      uint64 // exchange sequence of the last tick
	tradeCut uint64 // a draw below this is a trade
}

// NewFeed makes a feed from a validated config.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	venue, _ := tick.ParseVenue(cfg.Venue)
	f := &Feed{
		cfg:      cfg,
		venue:    venue,
		step:     tick.PriceFromFloat(cfg.TickSize),
		bids:     make([]int64, cfg.Instruments),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		tradeCut: uint64(cfg.TradeRatio * (1 << 32)),
	}
	start := tick.PriceFromFloat(cfg.StartPrice)
	for i := range f.bids {
		f.bids[i] = start
	}
	return f, nil
}

// Next fills t with the next tick: instruments in turn, the bid walking one
// step down, none or up, the ask one step above it, a trade at either. It
// sets ExchSeq (1, 2, …) and ExchTime to exchTime; PubTime is left to the
// publisher.
func (f *Feed) Next(t *tick.Tick, exchTime int64) {
	i := f.next
	if f.next++; f.next == len(f.bids) {
		f.next = 0
	}
	r := f.rng.Uint64()
	bid := f.bids[i] + f.step*(int64(r%3)-1)
	if bid < f.step {
		bid = f.step
	}
	f.bids[i] = bid
	draw := (r >> 8) & (1<<32 - 1)
	f.seq++
	*t = tick.Tick{
		Instrument: f.cfg.FirstInstrument + uint64(i),
		Venue:      f.venue,
		Price:      bid,
		Size:       100 * (1 + (r>>48)%10),
		ExchTime:   exchTime,
		ExchSeq:    f.seq,
	}
	switch {
	case draw < f.tradeCut:
		t.Kind = tick.Trade
		if r&(1<<40) != 0 {
			t.Price = bid + f.step
		}
	case r&(1<<41) != 0:
		t.Kind = tick.Bid
	default:
		t.Kind = tick.Ask
		t.Price = bid + f.step
	}
}

// Seq is the exchange sequence of the last tick Next produced.
func (f *Feed) Seq() uint64 { return f.seq }
