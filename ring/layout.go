package ring

import (
	"os"
	"sync/atomic"
	"unsafe"
)

// Byte layout of the three kinds of region. doc.go draws it; the compile-time
// checks below keep the structs, the constants and the drawing in step.
//
// Every multi-byte field is little endian (the structs are read in place, so
// tickbus runs only on little-endian hosts: amd64, arm64). Positions and
// sequences grow forever; the slot of seq is seq & (slots-1).

const (
	// LineSize is the padding unit of contended fields: two cache lines, so
	// adjacent-line prefetch does not couple neighbours.
	LineSize = 128

	// RegionHeaderSize is the header of a home or a ring region: one line of
	// read-mostly fields, one line for the hot counter (home) or the
	// consumer position (ring).
	RegionHeaderSize = 2 * LineSize

	// SlotHeaderSize is the header in front of every slot's payload.
	SlotHeaderSize = 32

	// SlotAlign is what a slot size is a multiple of: 32 bytes, Aeron's
	// frame alignment, so a 64-byte message with its header takes 96 bytes
	// (one and a half cache lines per tick, not two). Every slot (and so
	// its 8-byte stamp, the seqlock word) starts 32-byte aligned; a slot
	// starts either on a cache line or half way into one.
	SlotAlign = 32

	// MinSlotSize and MaxSlotSize bound a slot (header included; a multiple
	// of SlotAlign).
	MinSlotSize = 64
	MaxSlotSize = 1 << 20
	// MaxSlots bounds a ring or a journal (a power of two).
	MaxSlots = 1 << 24

	// StampBusy is the stamp a lossy-mode writer stores before it rewrites a
	// slot (a seqlock's odd value). No sequence ever takes it.
	StampBusy = ^uint64(0)

	// CreditCellSize is one reliable subscriber's credit cell at a writer.
	CreditCellSize = LineSize

	// HomeJournalOffset is where a home's journal starts: everything before
	// it (the header, the counter and the solo word, padding) is one grant
	// unit (rdma.MemoryConfig), so the fence grant of the counter word
	// hands its peer that unit only, not the journal. 64 KiB: a multiple of
	// every page size tickbus runs with, and the same on every host (the
	// offset is not in HomeDesc).
	HomeJournalOffset = 64 << 10

	// MaxCreditCells bounds a writer's credit cells (WriterConfig.MaxTargets):
	// each is a page and a memfd of its own on shm, mapped once in every
	// process it is granted to.
	MaxCreditCells = 4096

	regionMagicHome = 0x4d484254 // "TBHM"
	regionMagicRing = 0x47524254 // "TBRG"
	// layoutVersion 3: a slot's check covers its payload (headerCheck's
	// payloadSum, slot.go); 2 had slot sizes a multiple of SlotAlign (32),
	// not of 64, and the two-lane mix over the header alone. Descriptors
	// carry it (DescVersion): a peer of another layout is refused, never
	// misread (a version-2 writer's checks would fail in every slot).
	layoutVersion = 3
)

// regionHeader is line 0 of a home or ring region. Written once by the owner
// before the region's descriptor leaves the process; read by anyone.
type regionHeader struct {
	Magic    uint32 // regionMagicHome or regionMagicRing
	Version  uint16 // layoutVersion
	Mode     uint8  // ring: Mode; home: 0
	_        uint8
	Slots    uint32 // ring slots or journal slots (power of two; 0: no journal)
	SlotSize uint32 // bytes per slot, header included
	Epoch    uint64 // random per region incarnation
	Start    uint64 // first sequence of the topic (home) or expected by the ring
	_        [LineSize - 32]byte
}

// hotLine is line 1 of a region: the home's sequence counter (next sequence
// to claim; changed only by CAS/FAA through a QP) or the ring's head (next
// sequence its reader will deliver; stored by the reader only, for observers).
type hotLine struct {
	Value atomic.Uint64
	// Solo (home only): 0, or the next sequence the home's solo writer
	// hands out while Value holds the end of the run it reserved (solo.go;
	// soloBusy may be set). Stored by that writer and Home.Share only.
	Solo atomic.Uint64
	_    [LineSize - 16]byte
}

// slotHeader is the first SlotHeaderSize bytes of a slot. The payload follows.
type slotHeader struct {
	Stamp     uint64 // == seq once the slot is complete; written last
	PublishNs int64  // publish time, ns since the Unix epoch (publisher's clock)
	Len       uint32 // payload bytes, <= SlotSize - SlotHeaderSize
	Type      uint16 // application's tick type, opaque to ring
	Flags     uint16 // FlagSkip, application bits above
	Publisher uint32 // WriterConfig.PublisherID
	Check     uint32 // headerCheck(seq, fields, payload): catches garbage, torn headers and torn payloads
}

// creditStride is the distance between a writer's credit cells: a
// page, so that each cell is a grant unit of its own (rdma.MemoryConfig)
// and a subscriber's credit QP, granted its own cell, is handed memory of
// that cell only (64 cells, the default: 256 KiB with 4 KiB pages; at most
// MaxCreditCells: 16 MiB). The rest of each page is unused.
var creditStride = os.Getpagesize()

// creditCell is one reliable subscriber's consumed position at a writer:
// the subscriber's reader WRITEs it through its QP; the writer loads it.
type creditCell struct {
	Next atomic.Uint64 // the subscriber delivered every sequence below Next
	_    [CreditCellSize - 8]byte
}

// Offsets into a region.
const (
	offHeader  = 0
	offHot     = LineSize          // counter (home) or head (ring)
	offSlots   = RegionHeaderSize  // ring slots
	offJournal = HomeJournalOffset // home journal slots
	offStamp   = 0
	offBody    = 8 // first byte after the stamp: the rest of the header, then payload
	offPayload = SlotHeaderSize
)

// Compile-time checks, both ways round: a struct that drifts from its
// constant fails to build.
var (
	_ [LineSize - unsafe.Sizeof(regionHeader{})]byte
	_ [unsafe.Sizeof(regionHeader{}) - LineSize]byte
	_ [LineSize - unsafe.Sizeof(hotLine{})]byte
	_ [unsafe.Sizeof(hotLine{}) - LineSize]byte
	_ [SlotHeaderSize - unsafe.Sizeof(slotHeader{})]byte
	_ [unsafe.Sizeof(slotHeader{}) - SlotHeaderSize]byte
	_ [CreditCellSize - unsafe.Sizeof(creditCell{})]byte
	_ [unsafe.Sizeof(creditCell{}) - CreditCellSize]byte
	_ [offBody - unsafe.Offsetof(slotHeader{}.PublishNs)]byte
	_ [unsafe.Offsetof(slotHeader{}.PublishNs) - offBody]byte
	_ [offStamp - unsafe.Offsetof(slotHeader{}.Stamp)]byte
	_ [RegionHeaderSize - offHot - unsafe.Sizeof(hotLine{})]byte
	_ [offHot + unsafe.Sizeof(hotLine{}) - RegionHeaderSize]byte
	_ [32 - unsafe.Offsetof(regionHeader{}.Start) - 8]byte
	_ [unsafe.Offsetof(regionHeader{}.Start) + 8 - 32]byte
)

// Slot flags. Bits 0..7 belong to ring; 8..15 pass through to the handler.
const (
	// FlagSkip marks a slot that stands for a run of sequences a publisher
	// declared missing (PublishAt past the counter): the payload is the u64
	// last skipped sequence. Readers deliver it as an EventSkip.
	FlagSkip uint16 = 1 << 0
	// FlagsUser are the bits an application may set on a tick.
	FlagsUser uint16 = 0xff00
)

// regionSize is the byte size of a ring region of slots slots of slotSize
// bytes.
func regionSize(slots, slotSize int) int { return RegionHeaderSize + slots*slotSize }

// homeSize is the byte size of a home region whose journal has slots slots
// of slotSize bytes.
func homeSize(slots, slotSize int) int { return HomeJournalOffset + slots*slotSize }

func isPow2(n uint64) bool { return n != 0 && n&(n-1) == 0 }

// checkGeometry validates a slot count and size; slots may be 0 only when
// allowZero (a home without a journal).
func checkGeometry(slots, slotSize uint64, allowZero bool) bool {
	if slotSize < MinSlotSize || slotSize > MaxSlotSize || slotSize%SlotAlign != 0 {
		return false
	}
	if slots == 0 {
		return allowZero
	}
	return isPow2(slots) && slots <= MaxSlots
}

// at returns a pointer to T at byte off of mem. The caller guarantees off is
// in bounds and suitably aligned (regions are page-aligned and every offset
// used is a multiple of 8).
func at[T any](mem []byte, off int) *T {
	return (*T)(unsafe.Pointer(&mem[off]))
}

func stampAt(mem []byte, off int) *atomic.Uint64 { return at[atomic.Uint64](mem, off) }
