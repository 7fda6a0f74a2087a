package tcp

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// region is a registered memory region. Responders and requesters touch its
// memory between acquire and release, so Close waits for them before it
// unmaps.
type region struct {
	dev    *Device
	b      []byte
	addr   uint64
	lkey   uint32
	rkey   uint32
	access rdma.Access
	owned  *shmem.Mapping // nil for Register'ed memory

	users atomic.Int64 // goroutines inside acquire/release
	dead  atomic.Bool  // set by Close before it waits for users to drain

	// Direct mappings (direct.go) hold owned memory mapped past Close: the
	// last of Close and the mappings' Close unmaps it.
	mapMu   sync.Mutex
	maps    int
	closing bool

	once     sync.Once
	closeErr error
}

var _ rdma.MemoryRegion = (*region)(nil)

func (r *region) Bytes() []byte       { return r.b }
func (r *region) Addr() uint64        { return r.addr }
func (r *region) LKey() uint32        { return r.lkey }
func (r *region) RKey() uint32        { return r.rkey }
func (r *region) Access() rdma.Access { return r.access }
func (r *region) Remote() rdma.RemoteRegion {
	return rdma.RemoteRegion{Addr: r.addr, RKey: r.rkey, Len: uint64(len(r.b))}
}

// acquire pins the region's memory; false means it is closing.
func (r *region) acquire() bool {
	r.users.Add(1) // pairs with Close's Load of users after dead.Store
	if r.dead.Load() {
		r.users.Add(-1)
		return false
	}
	return true
}

func (r *region) release() { r.users.Add(-1) }

// span returns the bytes [addr, addr+n) of r, or false when they are not all
// inside it.
func (r *region) span(addr, n uint64) ([]byte, bool) {
	if addr < r.addr || n > uint64(len(r.b)) || addr-r.addr > uint64(len(r.b))-n {
		return nil, false
	}
	off := addr - r.addr
	return r.b[off : off+n : off+n], true
}

// Close deregisters the region: later ops naming its keys fail. It waits
// for ops already inside the memory, then unmaps memory it owns, or leaves
// that to the last direct mapping's Close.
func (r *region) Close() error {
	r.once.Do(func() {
		r.dev.forget(r)
		r.dead.Store(true)
		for r.users.Load() != 0 {
			runtime.Gosched()
		}
		r.mapMu.Lock()
		r.closing = true
		unmap := r.maps == 0
		r.mapMu.Unlock()
		if unmap && r.owned != nil {
			r.closeErr = r.owned.Close()
		}
	})
	return r.closeErr
}

// mapRef takes a direct mapping's reference; false once the region closed.
func (r *region) mapRef() bool {
	r.mapMu.Lock()
	defer r.mapMu.Unlock()
	if r.closing || r.dead.Load() {
		return false
	}
	r.maps++
	return true
}

// mapUnref drops a mapping's reference; the last one after Close unmaps.
func (r *region) mapUnref() error {
	r.mapMu.Lock()
	r.maps--
	unmap := r.maps == 0 && r.closing
	r.mapMu.Unlock()
	if unmap && r.owned != nil {
		return r.owned.Close()
	}
	return nil
}

// keyTable maps keys to regions. It is replaced whole on every change, so
// the data path reads it with one atomic load and no lock.
type keyTable struct {
	byL map[uint32]*region
	byR map[uint32]*region
}

// newKey returns a random key that is nonzero, not a small integer, and
// unused in t.
func newKey(t *keyTable) (uint32, error) {
	var b [4]byte
	for i := 0; i < 64; i++ {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("tcp: random key: %w", err)
		}
		k := binary.LittleEndian.Uint32(b[:])
		if k < 1<<16 {
			continue
		}
		if _, ok := t.byL[k]; ok {
			continue
		}
		if _, ok := t.byR[k]; ok {
			continue
		}
		return k, nil
	}
	return 0, fmt.Errorf("tcp: no free key")
}

func randUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("tcp: crypto/rand failed: " + err.Error()) // crypto/rand never fails on Linux
	}
	return binary.LittleEndian.Uint64(b[:])
}

// word returns the aligned 8-byte word at the start of b.
func word(b []byte) *uint64 { return (*uint64)(unsafe.Pointer(unsafe.SliceData(b))) }

func aligned8(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 }

func sliceAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
