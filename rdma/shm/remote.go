package shm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// maxRemoteRegions bounds how many regions one peer may have us map.
const maxRemoteRegions = 1 << 16

// remoteRegion is a peer's region mapped into this process. QPs of one
// device connected to the same peer device share one mapping of each
// region (see Device.mapRegion); the fields are immutable, refs is guarded
// by Device.mapsMu.
type remoteRegion struct {
	addr   uint64 // the owner's virtual address of byte 0
	length uint64
	access rdma.Access
	mem    []byte         // byte 0 of the region, length bytes
	base   unsafe.Pointer // the whole mapping, for munmap
	mlen   uintptr
	key    mapKey
	refs   int
}

// mapKey names one mapping: the same region (rkey and geometry) of the same
// memfds (device and inode of each, so a reused rkey can never alias other
// memory) from the same peer device.
type mapKey struct {
	peer                  string
	rkey                  uint32
	files                 string // device and inode of each memfd
	addr, length, fileOff uint64
	access                rdma.Access
}

// remoteTable maps rkeys to mapped regions. Immutable once published; the
// control path replaces it (copy on write).
type remoteTable struct{ m map[uint32]*remoteRegion }

var emptyRemote = &remoteTable{m: map[uint32]*remoteRegion{}}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// checkMemfd returns the stat of the file behind fd, which must be a
// regular file (a memfd) whose size is sealed against shrinking: otherwise
// its sender could truncate it under our mapping and our next access would
// SIGBUS.
func checkMemfd(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, fmt.Errorf("%w: fd is not a regular file (mode %#o)", ErrProtocol, st.Mode)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return st, fmt.Errorf("%w: memfd size not sealed against shrinking (seals %#x, %v)", ErrProtocol, seals, err)
	}
	return st, nil
}

// span is the part of one memfd a region maps: file bytes from..to, at
// offset at of the mapping.
type span struct {
	fd       int
	from, to uint64
	at       uint64
}

// regionSpans checks the geometry of a region that comes as the memfds
// fds, backing lens bytes of it each (the first from byte f.fileOff, the
// others from byte 0), against the files, and returns what to map of each
// and the mapping's length and the offset of the region's byte 0 in it.
// Every memfd but the last must be covered to its end, so that the next
// one's bytes follow in the region as in the mapping.
func regionSpans(f frame, fds []int, lens []uint64) ([]span, string, uint64, uint64, error) {
	var spans []span
	var files []byte
	var at uint64
	delta := f.fileOff % pageSize
	for i, fd := range fds {
		st, err := checkMemfd(fd)
		if err != nil {
			return nil, "", 0, 0, fmt.Errorf("shm: peer region %#x memfd %d: %w", f.rkey, i, err)
		}
		files = fmt.Appendf(files, "%d:%d,", st.Dev, st.Ino)
		size := uint64(st.Size)
		var off uint64
		if i == 0 {
			off = f.fileOff
		}
		last := i == len(fds)-1
		switch {
		case off > size || lens[i] > size-off:
			return nil, "", 0, 0, fmt.Errorf("%w: peer region %#x: %d bytes at %d past its memfd %d of %d bytes", ErrProtocol, f.rkey, lens[i], off, i, size)
		case !last && (off+lens[i] != size || size%pageSize != 0):
			return nil, "", 0, 0, fmt.Errorf("%w: peer region %#x: memfd %d of %d bytes not covered to its end (%d bytes at %d)", ErrProtocol, f.rkey, i, size, lens[i], off)
		}
		from := off &^ (pageSize - 1)
		to := (off + lens[i] + pageSize - 1) &^ (pageSize - 1)
		spans = append(spans, span{fd: fd, from: from, to: to, at: at})
		at += to - from
	}
	return spans, string(files), at, delta, nil
}

// mapRegion maps the region a regionAdd frame from peer describes, with
// its memfds fds backing lens bytes each (ctlConn.recvRegion), or takes
// another reference to the mapping a QP of this device already made of it,
// and closes the fds. The mapping is read-only unless the region grants
// remote write or atomics. Release it with releaseRegion.
func (d *Device) mapRegion(peer string, f frame, fds []int, lens []uint64) (*remoteRegion, error) {
	defer func() {
		for _, fd := range fds {
			closeFD(fd)
		}
	}()
	spans, files, mlen, delta, err := regionSpans(f, fds, lens)
	if err != nil {
		return nil, err
	}
	key := mapKey{peer: peer, rkey: f.rkey, files: files, addr: f.addr, length: f.length, fileOff: f.fileOff, access: f.access}
	d.mapsMu.Lock()
	if r := d.maps[key]; r != nil {
		r.refs++
		d.mapsMu.Unlock()
		return r, nil
	}
	d.mapsMu.Unlock()
	prot := unix.PROT_READ
	if f.access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0 {
		prot |= unix.PROT_WRITE
	}
	// Reserve the whole range, then map each memfd over its part.
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(mlen), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("shm: reserve %d bytes for peer region %#x: %w", mlen, f.rkey, err)
	}
	for _, s := range spans {
		if _, err := unix.MmapPtr(s.fd, int64(s.from), unsafe.Add(base, s.at), uintptr(s.to-s.from), prot,
			unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE); err != nil {
			_ = unix.MunmapPtr(base, uintptr(mlen))
			return nil, fmt.Errorf("shm: map peer region %#x: %w", f.rkey, err)
		}
	}
	mem := unsafe.Slice((*byte)(base), mlen)
	r := &remoteRegion{
		addr:   f.addr,
		length: f.length,
		access: f.access,
		mem:    mem[delta : delta+f.length : delta+f.length],
		base:   base,
		mlen:   uintptr(mlen),
		key:    key,
		refs:   1,
	}
	d.mapsMu.Lock()
	defer d.mapsMu.Unlock()
	if other := d.maps[key]; other != nil { // another QP mapped it meanwhile
		other.refs++
		_ = unix.MunmapPtr(base, uintptr(mlen))
		return other, nil
	}
	d.maps[key] = r
	return r, nil
}

// releaseRegion drops a reference; the last one unmaps. The caller has
// unpublished r and waited for its QP's posts, and every other QP that used
// r has done the same before dropping its reference.
func (d *Device) releaseRegion(r *remoteRegion) {
	d.mapsMu.Lock()
	r.refs--
	last := r.refs == 0
	if last {
		delete(d.maps, r.key)
	}
	d.mapsMu.Unlock()
	if last {
		_ = unix.MunmapPtr(r.base, r.mlen)
	}
}

// mapQueue maps the peer's receive queue a welcome frame describes and
// closes fd.
func mapQueue(f frame, fd int) (*outQueue, error) {
	defer closeFD(fd)
	st, err := checkMemfd(fd)
	if err != nil {
		return nil, fmt.Errorf("shm: peer receive queue: %w", err)
	}
	size := uint64(st.Size)
	if size != f.qSize {
		return nil, fmt.Errorf("%w: peer receive queue memfd of %d bytes, announced %d", ErrProtocol, size, f.qSize)
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("shm: map peer receive queue: %w", err)
	}
	o := &outQueue{view: newQueueView(m, int(f.qCap), int(f.qMaxSend)), mapping: m}
	if !o.view.headerMatches() {
		o.unmap()
		return nil, fmt.Errorf("%w: peer receive queue header does not match its welcome", ErrProtocol)
	}
	return o, nil
}

func (o *outQueue) unmap() {
	if o != nil {
		_ = unix.Munmap(o.mapping)
	}
}

func (t *remoteTable) releaseAll(d *Device) {
	for _, r := range t.m {
		d.releaseRegion(r)
	}
}

// addRemote publishes a region the peer registered after we connected.
func (q *QP) addRemote(rkey uint32, r *remoteRegion) error {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	old := q.remote.Load()
	if q.State() != rdma.QPReadyToSend {
		q.dev.releaseRegion(r)
		return nil
	}
	if _, dup := old.m[rkey]; dup || len(old.m) >= maxRemoteRegions {
		q.dev.releaseRegion(r)
		return fmt.Errorf("%w: duplicate rkey %#x or too many regions", ErrProtocol, rkey)
	}
	m := make(map[uint32]*remoteRegion, len(old.m)+1)
	for k, v := range old.m {
		m[k] = v
	}
	m[rkey] = r
	q.remote.Store(&remoteTable{m: m})
	return nil
}

// delRemote unpublishes a region the peer deregistered, waits until no post
// can be using it and unmaps it. Unknown rkeys are ignored.
func (q *QP) delRemote(rkey uint32) {
	q.ctlMu.Lock()
	defer q.ctlMu.Unlock()
	old := q.remote.Load()
	r, ok := old.m[rkey]
	if !ok {
		return
	}
	m := make(map[uint32]*remoteRegion, len(old.m))
	for k, v := range old.m {
		if k != rkey {
			m[k] = v
		}
	}
	q.remote.Store(&remoteTable{m: m})
	liveChanged()
	q.waitIdle()
	q.dev.releaseRegion(r)
}

// remoteAt returns the n bytes of the peer's memory at ra, or the status a
// target would complete with: StatusRemoteAccess for an unknown rkey, a
// range outside the region or a missing right. Hot path: the last rkey's
// region is cached (see QP.rtab), so a stream of writes to one ring does
// one map lookup per table change, not per request. Inside a post only.
func (q *QP) remoteAt(ra rdma.RemoteAddr, n uint64, need rdma.Access) ([]byte, rdma.Status) {
	t := q.remote.Load()
	r := q.rreg
	if t != q.rtab || ra.RKey != q.rkey {
		r = t.m[ra.RKey]
		q.rtab, q.rkey, q.rreg = t, ra.RKey, r
	}
	if r == nil || !r.access.Has(need) {
		if t == emptyRemote && rdma.QPState(q.state.Load()) != rdma.QPReadyToSend {
			// The QP left RTS after this post checked its state (the
			// peer hung up, or Close) and the peer's regions were
			// withdrawn (releaseRemote, which waits for this post):
			// flushed, as every later post is, not an access error.
			return nil, rdma.StatusFlushed
		}
		return nil, rdma.StatusRemoteAccess
	}
	if ra.Addr < r.addr || n > r.length || ra.Addr-r.addr > r.length-n {
		return nil, rdma.StatusRemoteAccess
	}
	off := ra.Addr - r.addr
	return r.mem[off : off+n : off+n], rdma.StatusSuccess
}
