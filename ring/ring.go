package ring

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// RingConfig configures a subscriber's ring and its reader.
type RingConfig struct {
	// Slots is the ring's capacity in ticks (a power of two up to MaxSlots).
	// Default 4096.
	Slots int
	// SlotSize is the byte size of a slot, header included (a multiple of 32
	// in MinSlotSize..MaxSlotSize). Writers refuse a ring whose slots are
	// smaller than their largest payload. Default 128.
	SlotSize int
	// Mode is Lossy (default) or Reliable.
	Mode Mode
	// Start is the first sequence the reader expects. Default 1. A ring that
	// joins a running topic starts at the home's counter as read after every
	// writer has added it as a target.
	Start uint64
	// GapTimeout is how long a claimed sequence may stay unwritten while
	// later ones are already there before the reader gives up on it (recovers
	// it from the journal or delivers EventGap). Default 100ms; negative
	// disables gap detection. In reliable mode keep it below the writers'
	// Timeout, or they fail while the reader waits for a dead claim. Keep it
	// well above the longest time the host may deschedule a live publisher
	// between its claim and its write, or that tick is reported as a gap
	// (and arrives too late to be delivered).
	GapTimeout time.Duration
	// MaxBatch bounds the ticks of one OnTicks call. Default 256.
	MaxBatch int
	// CQ is the send completion queue of every QP given to AddCredit and
	// SetJournal; the reader alone polls it. Needed only for those.
	CQ     rdma.CompletionQueue
	Logger zerolog.Logger
}

func (c *RingConfig) setDefaults() error {
	if c.Slots == 0 {
		c.Slots = 4096
	}
	if c.SlotSize == 0 {
		c.SlotSize = 128
	}
	if c.Mode == 0 {
		c.Mode = Lossy
	}
	if c.Start == 0 {
		c.Start = 1
	}
	if c.GapTimeout == 0 {
		c.GapTimeout = 100 * time.Millisecond
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	switch {
	case c.Slots < 0 || !checkGeometry(uint64(c.Slots), uint64(c.SlotSize), false):
		return fmt.Errorf("%w: Slots %d / SlotSize %d, want a power of two in 1..%d / a multiple of 32 in %d..%d",
			ErrInvalidConfig, c.Slots, c.SlotSize, MaxSlots, MinSlotSize, MaxSlotSize)
	case checkRegionBytes("Slots", c.Slots, c.SlotSize) != nil:
		return checkRegionBytes("Slots", c.Slots, c.SlotSize)
	case c.Mode != Lossy && c.Mode != Reliable:
		return fmt.Errorf("%w: Mode %d, want Lossy or Reliable", ErrInvalidConfig, c.Mode)
	case c.Start == StampBusy:
		return fmt.Errorf("%w: Start %d, want 1..2^64-2", ErrInvalidConfig, c.Start)
	case c.MaxBatch < 1 || c.MaxBatch > 1<<16:
		return fmt.Errorf("%w: MaxBatch %d, want 1..65536", ErrInvalidConfig, c.MaxBatch)
	case c.Mode == Lossy && c.MaxBatch*c.SlotSize > maxScratch:
		return fmt.Errorf("%w: MaxBatch %d × SlotSize %d: a lossy reader copies a batch out, want at most %d bytes",
			ErrInvalidConfig, c.MaxBatch, c.SlotSize, maxScratch)
	}
	return nil
}

// maxScratch bounds a lossy reader's copy area (MaxBatch slots).
const maxScratch = 64 << 20

// Ring is one subscriber's ring region, registered on the subscriber's
// device, and its single Reader. Writers reach it through queue pairs with
// the RingDesc.
type Ring struct {
	mr     rdma.MemoryRegion
	desc   RingDesc
	reader *Reader
	log    zerolog.Logger
	once   sync.Once
	err    error
}

// NewRing registers a ring on dev and makes its reader.
func NewRing(dev rdma.Device, cfg RingConfig) (*Ring, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: device is nil", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	size := regionSize(cfg.Slots, cfg.SlotSize)
	mr, err := dev.RegisterMemory(size, rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	if err != nil {
		return nil, fmt.Errorf("ring: register ring of %d bytes: %w", size, err)
	}
	epoch := newEpoch()
	*at[regionHeader](mr.Bytes(), offHeader) = regionHeader{Magic: regionMagicRing, Version: layoutVersion,
		Mode: uint8(cfg.Mode), Slots: uint32(cfg.Slots), SlotSize: uint32(cfg.SlotSize), Epoch: epoch, Start: cfg.Start}
	remote := mr.Remote()
	remote.Len = uint64(size)
	r := &Ring{mr: mr, log: cfg.Logger, desc: RingDesc{Mode: cfg.Mode, Epoch: epoch, Start: cfg.Start, Region: remote,
		Slots: uint32(cfg.Slots), SlotSize: uint32(cfg.SlotSize)}}
	r.reader = newReader(mr.Bytes()[:size], &cfg)
	r.log.Debug().Uint64("epoch", epoch).Int("slots", cfg.Slots).Int("slot", cfg.SlotSize).Stringer("mode", cfg.Mode).Msg("ring: registered")
	return r, nil
}

// Desc is what every writer needs; send its MarshalBinary.
func (r *Ring) Desc() RingDesc { return r.desc }

// Reader is the ring's one reader. One goroutine polls it.
func (r *Ring) Reader() *Reader { return r.reader }

// Close stops the reader (Poll returns 0 and ErrClosed) and deregisters
// the ring; writers still targeting it get completion errors and drop it.
// The caller must not Close while Poll runs on another goroutine.
// Idempotent.
func (r *Ring) Close() error {
	r.once.Do(func() {
		r.reader.closed.Store(true) // pairs with the Load at the top of Poll and ReadInto
		r.err = errors.Join(r.reader.closeJournal(), r.mr.Close())
	})
	return r.err
}
