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

// Mapping is one memfd and its shared mapping in this process.
type Mapping struct {
	fd   int
	b    []byte
	once sync.Once
	err  error
}

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
	fd, err := unix.MemfdCreate("tickbus-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shmem: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shmem: ftruncate %d: %w", size, err)
	}
	// Seal the size: a process the memfd is handed to cannot shrink it
	// under our mapping (a later access past the new end would SIGBUS us),
	// and a receiver can check the seal before it maps.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shmem: seal size: %w", err)
	}
	b, err := Map(fd, size)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	m := &Mapping{fd: fd, b: b}
	table.Lock()
	if table.m == nil {
		table.m = make(map[uintptr]*Mapping)
	}
	table.m[uintptr(unsafe.Pointer(&b[0]))] = m
	table.Unlock()
	return m, nil
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

// Fd is the memfd; it stays open until Close.
func (m *Mapping) Fd() int { return m.fd }

// Addr is the virtual address of the first byte.
func (m *Mapping) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&m.b[0]))) }

// Close unmaps the memory and closes the memfd. Idempotent.
func (m *Mapping) Close() error {
	m.once.Do(func() {
		table.Lock()
		delete(table.m, uintptr(unsafe.Pointer(&m.b[0])))
		table.Unlock()
		m.err = errors.Join(Unmap(m.b), unix.Close(m.fd))
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
