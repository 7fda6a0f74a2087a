package feed

import (
	"time"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/tick"
)

// Random is the synthetic random-walk feed as a Source: one tick per
// message, endless, stamped with the time Next is called.
type Random struct {
	f   *publisher.Feed
	out [1]tick.Tick
}

// NewRandom makes a random-walk source from cfg.
func NewRandom(cfg publisher.FeedConfig) (*Random, error) {
	f, err := publisher.NewFeed(cfg)
	if err != nil {
		return nil, err
	}
	return &Random{f: f}, nil
}

// Next returns the next tick; it never ends.
func (r *Random) Next() ([]tick.Tick, error) {
	r.f.Next(&r.out[0], time.Now().UnixNano())
	r.out[0].Flags |= tick.FlagLastInBatch
	return r.out[:], nil
}
