package publisher

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// DefaultSlotSize is the home's slot when Config.SlotSize is 0: a tick
// (tick.Size) and the slot header, rounded up to ring.SlotAlign (96 bytes).
const DefaultSlotSize = (ring.SlotHeaderSize + tick.Size + ring.SlotAlign - 1) &^ (ring.SlotAlign - 1)

// DefaultJournalSlots is the home's journal when Config.JournalSlots is 0.
const DefaultJournalSlots = 4096

// Config configures a Publisher.
type Config struct {
	// Topic to publish on (one NATS subject token). Required.
	Topic string
	// ID names the publisher among the topic's publishers on its node;
	// default the node id.
	ID string
	// PublisherID is stamped on every tick; default random non-zero.
	PublisherID uint32
	// Provider is the device the topic's home is allocated on if this
	// publisher becomes it, and the one its own claims use (a loopback
	// queue pair): "shm" (default) or "tcp". Every other queue pair uses
	// the provider the bus picks for its peer (Node.ProviderFor: shm on
	// this host, tcp across hosts, or the node's override), and the home is
	// registered on that provider's device too when a peer claims through
	// it.
	Provider string
	// SlotSize bounds every message of the topic if this publisher becomes
	// its home (default 96: a 56-byte tick and its 32-byte header, rounded up to a
	// multiple of ring.SlotAlign); JournalSlots is the
	// home's journal, which subscribers attach to recover losses (a power
	// of two; default DefaultJournalSlots; -1: none).
	SlotSize     int
	JournalSlots int
	// Claim is ring.ClaimCAS (default) or ring.ClaimFAA.
	Claim ring.ClaimMode
	// MaxBatch bounds PublishBatch (default 64).
	MaxBatch int
	// Timeout bounds each wait of the writer (default 1s).
	Timeout time.Duration
	// Idle is what the writer does while it waits (default rdma.Yield{}).
	Idle rdma.IdleStrategy
	// ArbitrationWindow is how long PublishAt waits for the other line of
	// an A/B pair to fill the sequences before one it is ahead at, before
	// declaring them missing (default 1ms; see ring.WriterConfig).
	ArbitrationWindow time.Duration
	// ConnectTimeout bounds connecting to a subscriber or the home
	// (default 5s).
	ConnectTimeout time.Duration
	// FailoverTimeout bounds how long one publish waits for the topic's
	// next home when the current one went away (default 3s); then it
	// returns ErrNoHome.
	FailoverTimeout time.Duration
	Logger          zerolog.Logger
}

func (c *Config) setDefaults() error {
	if c.Provider == "" {
		c.Provider = rdma.ProviderShm
	}
	if c.SlotSize == 0 {
		c.SlotSize = DefaultSlotSize
	}
	switch c.JournalSlots {
	case 0:
		c.JournalSlots = DefaultJournalSlots
	case -1:
		c.JournalSlots = 0
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 64
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.FailoverTimeout == 0 {
		c.FailoverTimeout = 3 * time.Second
	}
	for c.PublisherID == 0 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.PublisherID = binary.LittleEndian.Uint32(b[:])
	}
	switch {
	case c.Topic == "":
		return fmt.Errorf("%w: Topic is empty", ErrInvalidConfig)
	case c.Provider != rdma.ProviderShm && c.Provider != rdma.ProviderTCP:
		return fmt.Errorf("%w: Provider %q, want shm or tcp", ErrInvalidConfig, c.Provider)
	case c.SlotSize-ring.SlotHeaderSize < tick.Size:
		return fmt.Errorf("%w: SlotSize %d leaves no room for a %d-byte tick after the %d-byte header", ErrInvalidConfig, c.SlotSize, tick.Size, ring.SlotHeaderSize)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("%w: ConnectTimeout %v, want > 0", ErrInvalidConfig, c.ConnectTimeout)
	case c.FailoverTimeout < 0:
		return fmt.Errorf("%w: FailoverTimeout %v, want > 0", ErrInvalidConfig, c.FailoverTimeout)
	}
	return nil
}
