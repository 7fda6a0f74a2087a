package rdma

import (
	"encoding/binary"
	"fmt"
)

// Endpoint is what a peer's queue pair needs to connect to a local one. It
// crosses processes (through the bus), so its binary form is versioned and
// its decoder checks every length.
//
// Wire form, version 1, little endian:
//
//	u8  version (1)
//	u8  len, provider    (1..16 bytes)
//	u8  len, host id     (0..255 bytes)
//	u32 QPN
//	u32 PSN
//	u64 nonce
//	u16 len, addr        (0..1024 bytes)
//	u16 LID
//	[16]byte GID
//	u32 MTU
type Endpoint struct {
	Provider string // ProviderShm, ProviderTCP, ProviderVerbs
	HostID   string // the device's host id
	QPN      uint32 // queue pair number on its device
	PSN      uint32 // initial packet sequence number (verbs)
	// Nonce is random per queue pair, so that a peer's connect names this
	// incarnation of QPN and not an earlier one that reused the number.
	Nonce uint64
	Addr  string   // shm: unix socket path; tcp: host:port
	LID   uint16   // verbs: InfiniBand local identifier
	GID   [16]byte // verbs: RoCE/global identifier
	MTU   uint32   // verbs: path MTU in bytes
}

// EndpointVersion is the version this package writes.
const EndpointVersion = 1

const (
	maxProviderLen = 16
	maxHostIDLen   = 255
	maxAddrLen     = 1024
	endpointFixed  = 1 + 1 + 1 + 4 + 4 + 8 + 2 + 2 + 16 + 4
)

// AppendBinary appends the wire form of e to b.
func (e Endpoint) AppendBinary(b []byte) ([]byte, error) {
	if len(e.Provider) == 0 || len(e.Provider) > maxProviderLen {
		return b, fmt.Errorf("%w: provider %q, want 1..%d bytes", ErrMalformed, e.Provider, maxProviderLen)
	}
	if len(e.HostID) > maxHostIDLen {
		return b, fmt.Errorf("%w: host id of %d bytes, want at most %d", ErrMalformed, len(e.HostID), maxHostIDLen)
	}
	if len(e.Addr) > maxAddrLen {
		return b, fmt.Errorf("%w: addr of %d bytes, want at most %d", ErrMalformed, len(e.Addr), maxAddrLen)
	}
	b = append(b, EndpointVersion, byte(len(e.Provider)))
	b = append(b, e.Provider...)
	b = append(b, byte(len(e.HostID)))
	b = append(b, e.HostID...)
	b = binary.LittleEndian.AppendUint32(b, e.QPN)
	b = binary.LittleEndian.AppendUint32(b, e.PSN)
	b = binary.LittleEndian.AppendUint64(b, e.Nonce)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(e.Addr)))
	b = append(b, e.Addr...)
	b = binary.LittleEndian.AppendUint16(b, e.LID)
	b = append(b, e.GID[:]...)
	b = binary.LittleEndian.AppendUint32(b, e.MTU)
	return b, nil
}

// MarshalBinary returns the wire form of e.
func (e Endpoint) MarshalBinary() ([]byte, error) {
	return e.AppendBinary(make([]byte, 0, endpointFixed+len(e.Provider)+len(e.HostID)+len(e.Addr)))
}

// UnmarshalBinary decodes the wire form. Anything short, long, of another
// version or with a length out of range is an error wrapping ErrMalformed or
// ErrUnknownVersion, and e is left unchanged.
func (e *Endpoint) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.u8(); d.err == nil && v != EndpointVersion {
		return fmt.Errorf("%w: endpoint version %d, want %d", ErrUnknownVersion, v, EndpointVersion)
	}
	var out Endpoint
	out.Provider = d.str(int(d.u8()), 1, maxProviderLen, "provider")
	out.HostID = d.str(int(d.u8()), 0, maxHostIDLen, "host id")
	out.QPN = d.u32()
	out.PSN = d.u32()
	out.Nonce = d.u64()
	out.Addr = d.str(int(d.u16()), 0, maxAddrLen, "addr")
	out.LID = d.u16()
	copy(out.GID[:], d.bytes(16))
	out.MTU = d.u32()
	if err := d.done("endpoint"); err != nil {
		return err
	}
	*e = out
	return nil
}

func (e Endpoint) String() string {
	return fmt.Sprintf("%s:%s/qp%d@%s", e.Provider, e.HostID, e.QPN, e.Addr)
}

// RemoteRegion is what a peer needs to reach a MemoryRegion.
//
// Wire form, version 1, little endian: u8 version, u64 Addr, u32 RKey, u64 Len.
type RemoteRegion struct {
	Addr uint64 // virtual address of byte 0 in the owner's address space
	RKey uint32
	Len  uint64
}

// RemoteRegionVersion is the version this package writes.
const RemoteRegionVersion = 1

// RemoteRegionSize is the length of a RemoteRegion's wire form.
const RemoteRegionSize = 1 + 8 + 4 + 8

// AppendBinary appends the wire form of r to b.
func (r RemoteRegion) AppendBinary(b []byte) ([]byte, error) {
	if r.Addr+r.Len < r.Addr {
		return b, fmt.Errorf("%w: region at %#x of %d bytes wraps", ErrMalformed, r.Addr, r.Len)
	}
	b = append(b, RemoteRegionVersion)
	b = binary.LittleEndian.AppendUint64(b, r.Addr)
	b = binary.LittleEndian.AppendUint32(b, r.RKey)
	b = binary.LittleEndian.AppendUint64(b, r.Len)
	return b, nil
}

// MarshalBinary returns the wire form of r.
func (r RemoteRegion) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, RemoteRegionSize))
}

// UnmarshalBinary decodes the wire form; on error r is unchanged.
func (r *RemoteRegion) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.u8(); d.err == nil && v != RemoteRegionVersion {
		return fmt.Errorf("%w: region version %d, want %d", ErrUnknownVersion, v, RemoteRegionVersion)
	}
	out := RemoteRegion{Addr: d.u64(), RKey: d.u32(), Len: d.u64()}
	if err := d.done("region"); err != nil {
		return err
	}
	if out.Addr+out.Len < out.Addr {
		return fmt.Errorf("%w: region at %#x of %d bytes wraps", ErrMalformed, out.Addr, out.Len)
	}
	*r = out
	return nil
}

// Contains reports whether [addr, addr+n) lies inside r.
func (r RemoteRegion) Contains(addr, n uint64) bool {
	return addr >= r.Addr && n <= r.Len && addr-r.Addr <= r.Len-n
}

// decoder reads little-endian fields and remembers the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = fmt.Errorf("%w: truncated: want %d more bytes, have %d", ErrMalformed, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.bytes(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.bytes(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str(n, lo, hi int, what string) string {
	if d.err == nil && (n < lo || n > hi) {
		d.err = fmt.Errorf("%w: %s of %d bytes, want %d..%d", ErrMalformed, what, n, lo, hi)
	}
	return string(d.bytes(n))
}

func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrMalformed, len(d.b), what)
	}
	return d.err
}
