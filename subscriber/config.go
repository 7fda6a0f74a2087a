package subscriber

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/tick"
)

// DefaultSlots is the ring's size when Config.Slots is 0.
const DefaultSlots = 4096

// DefaultSlotSize is the ring's slot when Config.SlotSize is 0: a tick
// (tick.Size) and the slot header, rounded up to ring.SlotAlign (96 bytes).
const DefaultSlotSize = (ring.SlotHeaderSize + tick.Size + ring.SlotAlign - 1) &^ (ring.SlotAlign - 1)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrInvalidConfig: a configuration value is out of range; the message
	// names it.
	ErrInvalidConfig = errors.New("subscriber: invalid configuration")
	// ErrClosed: the subscriber was closed.
	ErrClosed = errors.New("subscriber: closed")
	// ErrPollBusy: Close gave up waiting for a Poll to return (a handler
	// that blocks, or that called Close itself); the ring is left mapped.
	ErrPollBusy = errors.New("subscriber: close: a Poll did not return")
	// ErrRefused: a publisher asked to connect over a provider the ring is
	// not registered on.
	ErrRefused = errors.New("subscriber: connect refused")
)

// Config configures a Subscriber.
type Config struct {
	// Topic to subscribe to (one NATS subject token). Required.
	Topic string
	// ID names the subscriber among the topic's subscribers on its node;
	// default the node id.
	ID string
	// Slots and SlotSize shape the ring (defaults DefaultSlots and DefaultSlotSize).
	Slots, SlotSize int
	// Mode is ring.Lossy (default) or ring.Reliable.
	Mode ring.Mode
	// GapTimeout: how long a claimed but unwritten sequence may block the
	// ring before it is reported as a gap (default 100ms).
	GapTimeout time.Duration
	// MaxBatch bounds one OnTicks call (default 256).
	MaxBatch int
	// Provider is the device the ring is allocated and first registered
	// on: "shm" (default) or "tcp". A publisher that connects over another
	// provider (the bus picks one per peer: shm on this host, tcp across
	// hosts) gets the same memory registered on that device too, so one
	// ring serves both; Subscriber.Providers says which are in use.
	Provider string
	// Idle is Run's idle strategy (default rdma.NewAdaptive()).
	Idle rdma.IdleStrategy
	// StatsInterval between stats messages (default 1s); negative disables
	// the stats loop.
	StatsInterval time.Duration
	// OnStats, if set, gets every stats message after it is published (from
	// the stats goroutine): the command line prints its status line here.
	OnStats func(*stats.Message)
	// DrainQuiet is how long Close polls after the last delivery before it
	// considers the ring drained (default GapTimeout plus 200ms, so a hole
	// is reported as a gap, but at most 2s: Close drains for at most 2s).
	DrainQuiet time.Duration
	// JoinGrace is how long after a publisher connected the ring's losses
	// still count as joining (BeforeJoin) while that publisher has not
	// delivered a tick (default 1s plus GapTimeout).
	JoinGrace time.Duration
	Logger    zerolog.Logger
}

func (c *Config) setDefaults() error {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	if c.Mode == 0 {
		c.Mode = ring.Lossy
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.Provider == "" {
		c.Provider = rdma.ProviderShm
	}
	if c.Idle == nil {
		c.Idle = rdma.NewAdaptive()
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = time.Second
	}
	if c.JoinGrace == 0 {
		gt := c.GapTimeout
		if gt <= 0 {
			gt = 100 * time.Millisecond
		}
		c.JoinGrace = time.Second + gt
	}
	if c.DrainQuiet == 0 {
		gt := c.GapTimeout
		if gt <= 0 {
			gt = 100 * time.Millisecond
		}
		c.DrainQuiet = min(gt+200*time.Millisecond, 2*time.Second) // Close drains for at most 2s anyway
	}
	switch {
	case c.Topic == "":
		return fmt.Errorf("%w: Topic is empty", ErrInvalidConfig)
	case c.Provider != rdma.ProviderShm && c.Provider != rdma.ProviderTCP:
		return fmt.Errorf("%w: Provider %q, want shm or tcp", ErrInvalidConfig, c.Provider)
	case c.StatsInterval > 0 && c.StatsInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: StatsInterval %v, want at least 10ms (or negative: off)", ErrInvalidConfig, c.StatsInterval)
	case c.DrainQuiet < 0 || c.DrainQuiet > 2*time.Second:
		return fmt.Errorf("%w: DrainQuiet %v, want 0..2s", ErrInvalidConfig, c.DrainQuiet)
	}
	return nil
}
