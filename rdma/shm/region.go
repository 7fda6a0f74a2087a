package shm

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// piece is one memfd behind a part of a region: mem[off:off+n] is bytes
// fileOff..fileOff+n of it.
type piece struct {
	fd      int // our own dup of the memfd, sent to peers
	off, n  uint64
	fileOff uint64
}

// Region is registered memory of a Device. It implements rdma.MemoryRegion.
// Its lkey and rkey are the same random nonzero key.
type Region struct {
	dev    *Device
	key    uint32
	access rdma.Access
	mem    []byte
	addr   uint64
	owned  *shmem.Mapping // nil when registered over memory it does not own
	// pieces are the memfds behind mem, in order (one unless the memory
	// was allocated in grant units: rdma.MemoryConfig): a peer is sent
	// those its grant covers, no other.
	pieces []piece

	once sync.Once
	err  error
}

var _ rdma.MemoryRegion = (*Region)(nil)

const validAccess = rdma.AccessLocalWrite | rdma.AccessRemote

// RegisterMemory allocates size bytes of memfd-backed, pre-touched memory
// and registers it.
func (d *Device) RegisterMemory(size int, access rdma.Access) (rdma.MemoryRegion, error) {
	if err := d.checkAlloc(size, access); err != nil {
		return nil, err
	}
	m, err := shmem.Alloc("shm-region", size)
	if err != nil {
		return nil, fmt.Errorf("shm: register %d bytes: %w", size, err)
	}
	r, err := d.register(m.Bytes()[:size], m, m, 0, access)
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return r, nil
}

// checkAlloc is what RegisterMemory and RegisterMemoryUnits check before
// they allocate.
func (d *Device) checkAlloc(size int, access rdma.Access) error {
	if err := d.errIfClosed(); err != nil {
		return err
	}
	if size <= 0 || size > maxRegion {
		return fmt.Errorf("%w: shm region size %d, want 1..%d", rdma.ErrInvalidConfig, size, maxRegion)
	}
	if access&^validAccess != 0 {
		return fmt.Errorf("%w: shm access %#x", rdma.ErrInvalidConfig, uint32(access))
	}
	return nil
}

var _ rdma.UnitRegisterer = (*Device)(nil)

// RegisterMemoryUnits is RegisterMemory of memory in grant units
// (rdma.MemoryConfig): one memfd per unit, so that a peer granted a range
// is sent the memfds of the units it covers only.
func (d *Device) RegisterMemoryUnits(size int, access rdma.Access, cfg rdma.MemoryConfig) (rdma.MemoryRegion, error) {
	if err := d.checkAlloc(size, access); err != nil {
		return nil, err
	}
	if err := cfg.Validate(size); err != nil {
		return nil, err
	}
	if cfg.GrantUnit == 0 {
		return d.RegisterMemory(size, access)
	}
	m, err := shmem.AllocUnits("shm-region", size, cfg.GrantUnit, cfg.GrantUnits)
	if err != nil {
		return nil, fmt.Errorf("shm: register %d bytes: %w", size, err)
	}
	r, err := d.register(m.Bytes()[:size], m, m, 0, access)
	if err != nil {
		return nil, errors.Join(err, m.Close())
	}
	return r, nil
}

// Register registers memory that a tickbus device of this process allocated
// (any page-aligned or unaligned part of it), so the same memory can be
// reached through several providers. Close the Region before the memory's
// owner; the Region does not keep the memory mapped.
func (d *Device) Register(mem []byte, access rdma.Access) (rdma.MemoryRegion, error) {
	if err := d.errIfClosed(); err != nil {
		return nil, err
	}
	if access&^validAccess != 0 {
		return nil, fmt.Errorf("%w: shm access %#x", rdma.ErrInvalidConfig, uint32(access))
	}
	m, off, err := shmem.Lookup(mem)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	return d.register(mem[:len(mem):len(mem)], nil, m, off, access)
}

// register registers mem, the bytes at offset off of m.
func (d *Device) register(mem []byte, owned, m *shmem.Mapping, off int, access rdma.Access) (*Region, error) {
	// Our own fds for peers, one per memfd behind mem. A region no peer
	// may write gets read-only fds, so a peer could not map it writable
	// even if it tried.
	var pieces []piece
	closeAll := func() {
		for _, p := range pieces {
			unix.Close(p.fd)
		}
	}
	end := off + len(mem)
	for _, p := range m.Pieces() {
		lo, hi := max(off, p.Off), min(end, p.Off+p.Len)
		if lo >= hi {
			continue
		}
		dup, err := dupFD(p.Fd, access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0)
		if err != nil {
			closeAll()
			return nil, err
		}
		pieces = append(pieces, piece{fd: dup, off: uint64(lo - off), n: uint64(hi - lo), fileOff: uint64(lo - p.Off)})
	}
	r := &Region{
		dev:    d,
		access: access,
		mem:    mem,
		addr:   uint64(uintptr(unsafe.Pointer(&mem[0]))),
		owned:  owned,
		pieces: pieces,
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		closeAll()
		return nil, fmt.Errorf("%w: shm device", rdma.ErrClosed)
	}
	var err error
	if r.key, err = d.randomKey(); err != nil {
		closeAll()
		return nil, err
	}
	d.setKey(r.key, r)
	d.regions[r] = struct{}{}
	if access&rdma.AccessRemote != 0 {
		// Every connected peer of an unconfined QP maps it before we
		// return, so an rkey handed out after this call works at once, as
		// on verbs. Confined QPs' peers get it when it is granted.
		if err := d.pushGrantLocked(r, grant{n: uint64(len(mem)), access: access & rdma.AccessRemote}, func(q *QP) bool { return q.grants == nil }); err != nil {
			d.log.Warn().Err(err).Uint32("key", r.key).Msg("shm: region not pushed to unconfined peers")
		}
	}
	d.log.Debug().Uint32("key", r.key).Int("len", len(mem)).Stringer("access", access).Msg("shm region registered")
	return r, nil
}

// dupFD is our own fd of the memfd fd: a duplicate, or a read-only one
// (reopened through /proc, so it cannot be mapped writable) unless
// writable.
func dupFD(fd int, writable bool) (int, error) {
	var dup int
	var err error
	if writable {
		dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	} else {
		dup, err = unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, fmt.Errorf("shm: own fd for the memfd: %w", err)
	}
	return dup, nil
}

// Bytes is the registered memory.
func (r *Region) Bytes() []byte { return r.mem }

// Addr is the virtual address of Bytes()[0].
func (r *Region) Addr() uint64 { return r.addr }

// LKey is the region's key.
func (r *Region) LKey() uint32 { return r.key }

// RKey is the region's key (the same as LKey).
func (r *Region) RKey() uint32 { return r.key }

// Access is what the region grants.
func (r *Region) Access() rdma.Access { return r.access }

// Remote is what a peer needs to reach the region.
func (r *Region) Remote() rdma.RemoteRegion {
	return rdma.RemoteRegion{Addr: r.addr, RKey: r.key, Len: uint64(len(r.mem))}
}

// Close deregisters the region: later ops naming its key fail, local and
// remote; every connected peer has unmapped it (or lost its connection)
// before Close returns; then, if the region owns its memory, it is unmapped.
// Close waits for running PostSend and Poll calls of the device to leave
// before it unmaps, so none of them can touch unmapped memory. Idempotent.
func (r *Region) Close() error {
	r.once.Do(func() {
		d := r.dev
		d.mu.Lock()
		d.setKey(r.key, nil)
		delete(d.regions, r)
		if r.access&rdma.AccessRemote != 0 {
			d.pushToLocked(delMsg(r.key), func(q *QP) bool {
				had := q.exportGrant(r).access != 0
				delete(q.grants, r)
				return had
			})
		}
		d.mu.Unlock()
		d.quiesce()
		var errs []error
		for _, p := range r.pieces {
			if err := unix.Close(p.fd); err != nil {
				errs = append(errs, fmt.Errorf("shm: close memfd: %w", err))
			}
		}
		if r.owned != nil {
			errs = append(errs, r.owned.Close())
		}
		r.err = errors.Join(errs...)
	})
	return r.err
}
