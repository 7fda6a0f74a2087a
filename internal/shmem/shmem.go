// Package shmem allocates memory that another process can map: memfd-backed
// (nothing in /dev/shm or the temp dir, gone when the last mapping and fd
// close), page-aligned, and pre-touched so the first tick takes no page fault.
// It keeps a process-wide table of its mappings so that a provider handed a
// []byte can find the memfd behind it.
package shmem

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotShared: the memory was not allocated by this package.
var ErrNotShared = errors.New("shmem: memory is not a shared mapping of this process")

// Mapping is shared memory of this process: one memfd mapped shared, or
// (AllocUnits) several, each mapped in turn into one contiguous range, so
// that a part of the memory can be handed to another process without the
// rest.
type Mapping struct {
	fd     int     // pieces[0].Fd
	pieces []Piece // the memfds behind b, in order; one for Alloc
	b      []byte
	ptr    bool // mapped piece by piece with MmapPtr: unmap with MunmapPtr
	once   sync.Once
	err    error
}

// Piece is one memfd behind a span of a Mapping: Bytes()[Off:Off+Len] is
// the memfd's bytes 0..Len (the whole memfd).
type Piece struct {
	Fd       int
	Off, Len int
}

// MaxUnits bounds the memfds of one AllocUnits mapping (each is a file
// descriptor here and a mapping in every process it is handed to).
const MaxUnits = 4096

var table struct {
	sync.Mutex
	m map[uintptr]*Mapping
}

// Alloc creates a memfd of size bytes (rounded up to whole pages), maps it
// shared, pre-touches every page and records it.
func Alloc(name string, size int) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shmem: size %d, want > 0", size)
	}
	size = RoundPage(size)
	// The size is sealed: a process the memfd is handed to cannot shrink it
	// under our mapping (a later access past the new end would SIGBUS us),
	// and a receiver can check the seal before it maps.
	fd, err := newMemfd(name, size)
	if err != nil {
		return nil, err
	}
	b, err := Map(fd, size)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	m := &Mapping{fd: fd, pieces: []Piece{{Fd: fd, Len: size}}, b: b}
	m.record()
	return m, nil
}

// AllocUnits is Alloc of memory backed in units: the first n units of unit
// bytes (a multiple of the page size) are each a memfd of their own, and
// the rest of the size rounded up to whole pages, if any, is one more. The
// memfds are mapped one after another into one contiguous range,
// pre-touched, so the memory reads and writes as one; a peer handed the
// memfd of one unit can map that unit and nothing else. At most MaxUnits
// memfds in all.
func AllocUnits(name string, size, unit, n int) (*Mapping, error) {
	ps := unix.Getpagesize()
	switch {
	case size <= 0:
		return nil, fmt.Errorf("shmem: size %d, want > 0", size)
	case unit <= 0 || unit%ps != 0:
		return nil, fmt.Errorf("shmem: unit %d, want a positive multiple of the page size %d", unit, ps)
	case n < 1:
		return nil, fmt.Errorf("shmem: %d units, want at least 1", n)
	}
	size = RoundPage(size)
	var lens []int
	for off := 0; off < size; {
		l := size - off
		if len(lens) < n {
			l = min(l, unit)
		}
		lens = append(lens, l)
		off += l
		if len(lens) > MaxUnits {
			return nil, fmt.Errorf("shmem: %d bytes in units of %d: more than %d memfds", size, unit, MaxUnits)
		}
	}
	// Reserve the range, then map each memfd over its part (MAP_FIXED
	// replaces the reservation's pages, nothing else).
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("shmem: reserve %d bytes: %w", size, err)
	}
	m := &Mapping{b: unsafe.Slice((*byte)(base), size), ptr: true}
	fail := func(err error) (*Mapping, error) {
		_ = unix.MunmapPtr(base, uintptr(size))
		for _, p := range m.pieces {
			unix.Close(p.Fd)
		}
		return nil, err
	}
	off := 0
	for _, l := range lens {
		fd, err := newMemfd(name, l)
		if err != nil {
			return fail(err)
		}
		m.pieces = append(m.pieces, Piece{Fd: fd, Off: off, Len: l})
		at := unsafe.Add(base, off)
		if _, err := unix.MmapPtr(fd, 0, at, uintptr(l), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE); err != nil {
			return fail(fmt.Errorf("shmem: map unit of %d bytes at %d: %w", l, off, err))
		}
		off += l
	}
	m.fd = m.pieces[0].Fd
	m.record()
	return m, nil
}

// newMemfd creates a memfd of size bytes, sealed against growing and
// shrinking.
func newMemfd(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate("tickbus-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("shmem: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("shmem: ftruncate %d: %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("shmem: seal size: %w", err)
	}
	return fd, nil
}

func (m *Mapping) record() {
	b := m.b
	table.Lock()
	if table.m == nil {
		table.m = make(map[uintptr]*Mapping)
	}
	table.m[uintptr(unsafe.Pointer(&b[0]))] = m
	table.Unlock()
}

// Map maps size bytes of fd shared and read-write, populating the page
// tables so the first access does not fault.
func Map(fd, size int) ([]byte, error) {
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("shmem: mmap %d bytes: %w", size, err)
	}
	return b, nil
}

// Unmap releases a mapping made by Map.
func Unmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("shmem: munmap: %w", err)
	}
	return nil
}

// Bytes is the mapped memory.
func (m *Mapping) Bytes() []byte { return m.b }

// Fd is the memfd (of an AllocUnits mapping, the first unit's); it stays
// open until Close.
func (m *Mapping) Fd() int { return m.fd }

// Pieces are the memfds behind the memory, in order (one for Alloc); they
// stay open until Close. The caller must not modify the slice.
func (m *Mapping) Pieces() []Piece { return m.pieces }

// Addr is the virtual address of the first byte.
func (m *Mapping) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&m.b[0]))) }

// Close unmaps the memory and closes the memfd. Idempotent.
func (m *Mapping) Close() error {
	m.once.Do(func() {
		table.Lock()
		delete(table.m, uintptr(unsafe.Pointer(&m.b[0])))
		table.Unlock()
		var errs []error
		if m.ptr {
			if err := unix.MunmapPtr(unsafe.Pointer(&m.b[0]), uintptr(len(m.b))); err != nil {
				errs = append(errs, fmt.Errorf("shmem: munmap: %w", err))
			}
		} else {
			errs = append(errs, Unmap(m.b))
		}
		for _, p := range m.pieces {
			errs = append(errs, unix.Close(p.Fd))
		}
		m.err = errors.Join(errs...)
	})
	return m.err
}

// Lookup finds the mapping that holds all of b and b's offset in it.
func Lookup(b []byte) (*Mapping, int, error) {
	if len(b) == 0 {
		return nil, 0, ErrNotShared
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	table.Lock()
	defer table.Unlock()
	for base, m := range table.m {
		if p >= base && p-base+uintptr(len(b)) <= uintptr(len(m.b)) {
			return m, int(p - base), nil
		}
	}
	return nil, 0, ErrNotShared
}

// RoundPage rounds n up to a whole number of pages.
func RoundPage(n int) int {
	ps := unix.Getpagesize()
	return (n + ps - 1) / ps * ps
}
