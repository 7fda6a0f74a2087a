package ring

import (
	"encoding/binary"
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Mode is a subscription's flow control.
type Mode uint8

const (
	// Lossy never slows a publisher: a subscriber that falls a ring behind
	// is lapped and told exactly which sequences it lost (EventOverrun).
	Lossy Mode = 1
	// Reliable makes publishers wait for room: the reader writes its
	// consumed position into a credit cell at each publisher, and a
	// publisher fails with ErrBackPressure after its timeout.
	Reliable Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Lossy:
		return "lossy"
	case Reliable:
		return "reliable"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads "lossy" or "reliable".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "lossy", "":
		return Lossy, nil
	case "reliable":
		return Reliable, nil
	}
	return 0, fmt.Errorf("%w: mode %q, want lossy or reliable", ErrInvalidConfig, s)
}

// Descriptor versions and kinds. The kind byte keeps one descriptor from
// being decoded as another. The version is the region layout's
// (layoutVersion): a descriptor names memory laid out by it, so a peer of
// another layout (version 1: slots a multiple of 64, another header check)
// is refused with ErrUnknownVersion, not written or read wrongly.
const (
	DescVersion = layoutVersion

	kindHome   = 'H'
	kindRing   = 'R'
	kindCredit = 'C'

	regionWire     = 8 + 4 + 8
	HomeDescSize   = 2 + 8 + 8 + regionWire + 4 + 4
	RingDescSize   = 2 + 1 + 8 + 8 + regionWire + 4 + 4
	CreditDescSize = 2 + 4 + 8 + regionWire
)

// HomeDesc is what a publisher (and a reader that recovers from the
// journal) needs to reach a topic's home: the sequence counter and the
// journal. It travels between processes.
//
// Wire form, version 3, little endian (HomeDescSize bytes):
//
//	u8 version (2), u8 kind 'H', u64 epoch, u64 start,
//	u64 region addr, u32 rkey, u64 region len, u32 journal slots, u32 slot size
type HomeDesc struct {
	Epoch        uint64            // random per home incarnation
	Start        uint64            // the topic's first sequence
	Region       rdma.RemoteRegion // the whole home region
	JournalSlots uint32            // 0: no journal
	SlotSize     uint32            // bytes per slot, header included
}

// CounterAddr is the remote address of the sequence counter.
func (d HomeDesc) CounterAddr() uint64 { return d.Region.Addr + offHot }

// MaxPayload is the largest payload a slot of this home holds.
func (d HomeDesc) MaxPayload() int { return int(d.SlotSize) - SlotHeaderSize }

func (d HomeDesc) validate() error {
	if !checkGeometry(uint64(d.JournalSlots), uint64(d.SlotSize), true) {
		return fmt.Errorf("%w: home journal of %d slots of %d bytes, want a power of two up to %d slots of a multiple of 32 in %d..%d bytes",
			ErrMalformed, d.JournalSlots, d.SlotSize, MaxSlots, MinSlotSize, MaxSlotSize)
	}
	return checkRegion(d.Region, uint64(homeSize(int(d.JournalSlots), int(d.SlotSize))))
}

// AppendBinary appends the wire form of d to b.
func (d HomeDesc) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	b = append(b, DescVersion, kindHome)
	b = binary.LittleEndian.AppendUint64(b, d.Epoch)
	b = binary.LittleEndian.AppendUint64(b, d.Start)
	b = appendRegion(b, d.Region)
	b = binary.LittleEndian.AppendUint32(b, d.JournalSlots)
	b = binary.LittleEndian.AppendUint32(b, d.SlotSize)
	return b, nil
}

// MarshalBinary returns the wire form of d.
func (d HomeDesc) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, HomeDescSize))
}

// UnmarshalBinary decodes the wire form. Bad input is an error wrapping
// ErrMalformed or ErrUnknownVersion and leaves d unchanged.
func (d *HomeDesc) UnmarshalBinary(b []byte) error {
	r := descReader{b: b}
	r.head(kindHome, "home")
	out := HomeDesc{Epoch: r.u64(), Start: r.u64(), Region: r.region(), JournalSlots: r.u32(), SlotSize: r.u32()}
	if err := r.done("home"); err != nil {
		return err
	}
	if err := out.validate(); err != nil {
		return err
	}
	*d = out
	return nil
}

// SameRegion reports whether d and o describe the same home: equal in
// everything but the rkey, which names the region as one connection's
// grant (the signed record carries the region's own; a connect reply, the
// grant made for that connection).
func (d HomeDesc) SameRegion(o HomeDesc) bool {
	d.Region.RKey, o.Region.RKey = 0, 0
	return d == o
}

// WithRKey is d naming its region by rkey: the descriptor of one
// connection, rkey being the grant made for it (ring.Grant).
func (d HomeDesc) WithRKey(rkey uint32) HomeDesc {
	d.Region.RKey = rkey
	return d
}

// RingDesc is what a publisher needs to write into a subscriber's ring.
//
// Wire form, version 3, little endian (RingDescSize bytes):
//
//	u8 version (2), u8 kind 'R', u8 mode, u64 epoch, u64 start,
//	u64 region addr, u32 rkey, u64 region len, u32 slots, u32 slot size
type RingDesc struct {
	Mode     Mode
	Epoch    uint64 // random per ring incarnation
	Start    uint64 // first sequence the ring's reader expects
	Region   rdma.RemoteRegion
	Slots    uint32
	SlotSize uint32
}

// MaxPayload is the largest payload a slot of this ring holds.
func (d RingDesc) MaxPayload() int { return int(d.SlotSize) - SlotHeaderSize }

func (d RingDesc) validate() error {
	if d.Mode != Lossy && d.Mode != Reliable {
		return fmt.Errorf("%w: ring mode %d, want %d (lossy) or %d (reliable)", ErrMalformed, d.Mode, Lossy, Reliable)
	}
	if !checkGeometry(uint64(d.Slots), uint64(d.SlotSize), false) {
		return fmt.Errorf("%w: ring of %d slots of %d bytes, want a power of two up to %d slots of a multiple of 32 in %d..%d bytes",
			ErrMalformed, d.Slots, d.SlotSize, MaxSlots, MinSlotSize, MaxSlotSize)
	}
	if d.Start == 0 || d.Start == StampBusy {
		return fmt.Errorf("%w: ring start %d, want 1..2^64-2", ErrMalformed, d.Start)
	}
	return checkRegion(d.Region, uint64(regionSize(int(d.Slots), int(d.SlotSize))))
}

// AppendBinary appends the wire form of d to b.
func (d RingDesc) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	b = append(b, DescVersion, kindRing, byte(d.Mode))
	b = binary.LittleEndian.AppendUint64(b, d.Epoch)
	b = binary.LittleEndian.AppendUint64(b, d.Start)
	b = appendRegion(b, d.Region)
	b = binary.LittleEndian.AppendUint32(b, d.Slots)
	b = binary.LittleEndian.AppendUint32(b, d.SlotSize)
	return b, nil
}

// MarshalBinary returns the wire form of d.
func (d RingDesc) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, RingDescSize))
}

// UnmarshalBinary decodes the wire form; on error d is unchanged.
func (d *RingDesc) UnmarshalBinary(b []byte) error {
	r := descReader{b: b}
	r.head(kindRing, "ring")
	out := RingDesc{Mode: Mode(r.u8()), Epoch: r.u64(), Start: r.u64(), Region: r.region(), Slots: r.u32(), SlotSize: r.u32()}
	if err := r.done("ring"); err != nil {
		return err
	}
	if err := out.validate(); err != nil {
		return err
	}
	*d = out
	return nil
}

// SameRegion reports whether d and o describe the same ring: equal in
// everything but the rkey (see HomeDesc.SameRegion).
func (d RingDesc) SameRegion(o RingDesc) bool {
	d.Region.RKey, o.Region.RKey = 0, 0
	return d == o
}

// WithRKey is d naming its region by rkey: the descriptor of one
// connection, rkey being the grant made for it (ring.Grant).
func (d RingDesc) WithRKey(rkey uint32) RingDesc {
	d.Region.RKey = rkey
	return d
}

// WithRKey returns a fresh copy of desc, the wire form of a HomeDesc or a
// RingDesc, naming its region by rkey: what a node replies to one
// connect, rkey being the grant made for that connection (Grant). desc
// itself, shared by every connection, is not changed. Bad input is an
// error wrapping ErrMalformed or ErrUnknownVersion.
func WithRKey(desc []byte, rkey uint32) ([]byte, error) {
	if len(desc) >= 2 && desc[1] == kindHome {
		var d HomeDesc
		if err := d.UnmarshalBinary(desc); err != nil {
			return nil, err
		}
		return d.WithRKey(rkey).MarshalBinary()
	}
	var d RingDesc
	if err := d.UnmarshalBinary(desc); err != nil {
		return nil, err
	}
	return d.WithRKey(rkey).MarshalBinary()
}

// CreditDesc names one reliable subscriber's credit cell at one writer:
// Writer.AddTarget returns it for a reliable ring, the control plane carries
// it to the subscriber, and the subscriber's Reader.AddCredit writes its
// consumed position there.
//
// Wire form, version 3, little endian (CreditDescSize bytes):
//
//	u8 version (2), u8 kind 'C', u32 publisher id, u64 writer epoch,
//	u64 cell addr, u32 rkey, u64 cell len (8..128)
type CreditDesc struct {
	PublisherID uint32
	Epoch       uint64            // random per writer incarnation
	Cell        rdma.RemoteRegion // the cell: Addr 8-aligned, Len 8..CreditCellSize
}

func (d CreditDesc) validate() error {
	if d.Cell.Len < 8 || d.Cell.Len > CreditCellSize || d.Cell.Addr%8 != 0 {
		return fmt.Errorf("%w: credit cell at %#x of %d bytes, want 8-aligned, 8..%d bytes", ErrMalformed, d.Cell.Addr, d.Cell.Len, CreditCellSize)
	}
	return checkRegion(d.Cell, d.Cell.Len)
}

// AppendBinary appends the wire form of d to b.
func (d CreditDesc) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	b = append(b, DescVersion, kindCredit)
	b = binary.LittleEndian.AppendUint32(b, d.PublisherID)
	b = binary.LittleEndian.AppendUint64(b, d.Epoch)
	b = appendRegion(b, d.Cell)
	return b, nil
}

// MarshalBinary returns the wire form of d.
func (d CreditDesc) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, CreditDescSize))
}

// UnmarshalBinary decodes the wire form; on error d is unchanged.
func (d *CreditDesc) UnmarshalBinary(b []byte) error {
	r := descReader{b: b}
	r.head(kindCredit, "credit")
	out := CreditDesc{PublisherID: r.u32(), Epoch: r.u64(), Cell: r.region()}
	if err := r.done("credit"); err != nil {
		return err
	}
	if err := out.validate(); err != nil {
		return err
	}
	*d = out
	return nil
}

func checkRegion(r rdma.RemoteRegion, want uint64) error {
	switch {
	case r.Addr+r.Len < r.Addr:
		return fmt.Errorf("%w: region at %#x of %d bytes wraps", ErrMalformed, r.Addr, r.Len)
	case r.Addr%8 != 0:
		return fmt.Errorf("%w: region at %#x, want 8-byte alignment", ErrMalformed, r.Addr)
	case r.Len != want:
		return fmt.Errorf("%w: region of %d bytes, the layout needs %d", ErrMalformed, r.Len, want)
	}
	return nil
}

func appendRegion(b []byte, r rdma.RemoteRegion) []byte {
	b = binary.LittleEndian.AppendUint64(b, r.Addr)
	b = binary.LittleEndian.AppendUint32(b, r.RKey)
	return binary.LittleEndian.AppendUint64(b, r.Len)
}

// descReader reads little-endian fields and keeps the first error.
type descReader struct {
	b   []byte
	err error
}

func (r *descReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated: want %d more bytes, have %d", ErrMalformed, n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *descReader) head(kind byte, what string) {
	v := r.take(2)
	if v == nil {
		return
	}
	if v[0] != DescVersion {
		r.err = fmt.Errorf("%w: %s descriptor version %d, want %d (the ring layout of this build: a peer of another tickbus release?)", ErrUnknownVersion, what, v[0], DescVersion)
		return
	}
	if v[1] != kind {
		r.err = fmt.Errorf("%w: descriptor kind %q, want %q (%s)", ErrMalformed, v[1], kind, what)
	}
}

func (r *descReader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *descReader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *descReader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (r *descReader) region() rdma.RemoteRegion {
	return rdma.RemoteRegion{Addr: r.u64(), RKey: r.u32(), Len: r.u64()}
}

func (r *descReader) done(what string) error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after the %s descriptor", ErrMalformed, len(r.b), what)
	}
	return nil
}
