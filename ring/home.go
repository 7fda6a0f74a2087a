package ring

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// HomeConfig configures a topic's home: its sequence counter and journal.
type HomeConfig struct {
	// JournalSlots is how many recent ticks the journal keeps for readers
	// that recover a gap or an overrun (a power of two, or 0 for none).
	// Default 0.
	JournalSlots int
	// SlotSize is the byte size of a journal slot, header included (a
	// multiple of 32 in MinSlotSize..MaxSlotSize). It bounds the payload of
	// every writer of the topic. Default 128.
	SlotSize int
	// Start is the topic's first sequence. Default 1. Sequence 0 is never
	// used, so a zeroed slot never looks written.
	Start  uint64
	Logger zerolog.Logger
}

// Home is a topic's sequencer region, registered on the device of the
// process that owns the topic: the counter that CAS/FAA claims advance, and
// the journal. Every writer, the home's own included, reaches it through a
// queue pair; the owner never touches the counter with a CPU atomic after
// NewHome, so a NIC whose atomics are atomic only among themselves stays
// correct. (A writer whose QP to the home maps it directly, on shm, runs
// CPU atomics on the counter: shm's QP atomics are CPU atomics on the same
// word, AtomicGlobal, so they are atomic against each other.)
type Home struct {
	mr   rdma.MemoryRegion
	desc HomeDesc
	log  zerolog.Logger
	once sync.Once
	err  error
	solo soloState   // solo.go
	dev  rdma.Device // the device the home is registered on
	// closed: Close began; the region (the counter, the solo word) may be
	// unmapped, and Share and Counter touch it no more.
	closed atomic.Bool
}

// NewHome registers a home on dev. The device must have remote atomics.
func NewHome(dev rdma.Device, cfg HomeConfig) (*Home, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: device is nil", ErrInvalidConfig)
	}
	if dev.Caps().Atomic == rdma.AtomicNone {
		return nil, fmt.Errorf("%w: %s device on %s", ErrDeviceAtomics, dev.Provider(), dev.HostID())
	}
	if cfg.SlotSize == 0 {
		cfg.SlotSize = 128
	}
	if cfg.Start == 0 {
		cfg.Start = 1
	}
	if cfg.Start == StampBusy {
		return nil, fmt.Errorf("%w: Start %d, want 1..2^64-2", ErrInvalidConfig, cfg.Start)
	}
	if err := checkRegionBytes("JournalSlots", cfg.JournalSlots, cfg.SlotSize); err != nil {
		return nil, err
	}
	if cfg.JournalSlots < 0 || !checkGeometry(uint64(cfg.JournalSlots), uint64(cfg.SlotSize), true) {
		return nil, fmt.Errorf("%w: JournalSlots %d / SlotSize %d, want a power of two up to %d (or 0) / a multiple of 32 in %d..%d",
			ErrInvalidConfig, cfg.JournalSlots, cfg.SlotSize, MaxSlots, MinSlotSize, MaxSlotSize)
	}
	size := homeSize(cfg.JournalSlots, cfg.SlotSize)
	// The counter's unit (header, counter, solo word) apart from the
	// journal's: a peer granted the counter word (the fence) is handed the
	// first and not the journal (on shm; elsewhere grants are exact).
	mr, err := rdma.RegisterMemory(dev, size, rdma.AccessLocalWrite|rdma.AccessRemote,
		rdma.MemoryConfig{GrantUnit: HomeJournalOffset, GrantUnits: 1})
	if err != nil {
		return nil, fmt.Errorf("ring: register home of %d bytes: %w", size, err)
	}
	epoch := newEpoch()
	hdr := at[regionHeader](mr.Bytes(), offHeader)
	*hdr = regionHeader{Magic: regionMagicHome, Version: layoutVersion, Slots: uint32(cfg.JournalSlots),
		SlotSize: uint32(cfg.SlotSize), Epoch: epoch, Start: cfg.Start}
	// The only CPU store to the counter: before the descriptor exists, so
	// before any peer can reach it. Later loads are the QP atomics' own.
	at[hotLine](mr.Bytes(), offHot).Value.Store(cfg.Start) // pairs with Counter's Load; peers see it through the descriptor's hand-off
	remote := mr.Remote()
	remote.Len = uint64(size)
	h := &Home{mr: mr, log: cfg.Logger, desc: HomeDesc{Epoch: epoch, Start: cfg.Start, Region: remote,
		JournalSlots: uint32(cfg.JournalSlots), SlotSize: uint32(cfg.SlotSize)}}
	h.solo.next = &at[hotLine](mr.Bytes(), offHot).Solo
	h.dev = dev
	addLocalHome(h)
	h.log.Debug().Uint64("epoch", epoch).Int("journal", cfg.JournalSlots).Int("slot", cfg.SlotSize).Msg("ring: home registered")
	return h, nil
}

// Desc is what writers and recovering readers need; send its MarshalBinary.
func (h *Home) Desc() HomeDesc { return h.desc }

// Counter is the next sequence to be claimed, read locally. For observers
// and for choosing a late-joining ring's Start; claims go through a QP.
// 0 once the home is closed.
func (h *Home) Counter() uint64 {
	if h.closed.Load() {
		return 0
	}
	raw := at[hotLine](h.mr.Bytes(), offHot).Value.Load() // pairs with the QP atomics of every writer
	if s := &h.solo; s.armed.Load() && s.req.Load() == 0 {
		// A solo writer's run: the counter holds its end; this is the
		// next sequence it hands out. A counter that moved from the run's
		// end (fenced) is the counter: the writer leaves solo at its next
		// claim.
		if v := s.next.Load() &^ soloBusy; v != 0 && raw == s.end.Load() { // pairs with the writer's Store64
			return v
		}
	}
	return raw
}

// Close deregisters the home. Idempotent.
func (h *Home) Close() error {
	h.once.Do(func() {
		h.closed.Store(true)
		dropLocalHome(h)
		h.err = h.mr.Close()
	})
	return h.err
}

func newEpoch() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (getrandom)
	return binary.LittleEndian.Uint64(b[:]) | 1
}
