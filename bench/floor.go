package bench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// The floor: a single-producer single-consumer ring of cache-line slots in
// a memfd that two processes map. One tick is one slot (one line for a
// 64-byte tick) written and then stamped by the publisher and seen by the
// subscriber spinning on the stamp: no provider, no protocol, nothing but
// the line moving between the two cores. tickbus can only add to this.
//
//	+0    head u64: subscriber's position (own 128 bytes, written by the
//	      subscriber, read by the publisher when the ring looks full)
//	+256  slot[pos & (slots-1)], slot size = Size rounded up to 64:
//	        u64 stamp = pos+1, written last (atomic store)
//	        the tick (package tick), then filler
const floorHeader = 256

func floorSlotSize(size int) int { return (size + 63) &^ 63 }

func floorRegionSize(size, slots int) int { return floorHeader + slots*floorSlotSize(size) }

func init() {
	transports[CaseFloor] = transport{openTx: openFloorTx, openRx: openFloorRx}
}

func u64at(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

// floorFd is the descriptor number of topic's region in a child (the
// parent passes topic 0 and 1 as its first two extra files).
func floorFd(topic int) int { return 3 + topic }

type floorTx struct {
	b        []byte
	size     int
	slotSize int
	slots    int64
	pos      int64
	head     int64 // cached subscriber position
	filler   []byte
	codec    *msgCodec
	idle     rdma.IdleStrategy
}

func openFloorTx(a roleArgs, topic int) (txPort, error) {
	b, err := shmem.Map(floorFd(topic), floorRegionSize(a.size, a.slots))
	if err != nil {
		return nil, fmt.Errorf("bench: floor region %d: %w", topic, err)
	}
	idle, _ := rdma.ParseIdle(a.idle)
	return newFloorTx(b, a.size, a.slots, idle), nil
}

// newFloorTx writes into b, a mapping of floorRegionSize(size, slots)
// bytes; its close unmaps b.
func newFloorTx(b []byte, size, slots int, idle rdma.IdleStrategy) *floorTx {
	return &floorTx{b: b, size: size, slotSize: floorSlotSize(size), slots: int64(slots), filler: make([]byte, size-MinSize), codec: newCodec(), idle: idle}
}

func (t *floorTx) room(n int, deadline int64) error {
	for spins := 0; t.pos+int64(n)-t.head > t.slots; spins++ {
		// Pairs with the subscriber's store of head after it read a slot.
		t.head = int64(atomic.LoadUint64(u64at(t.b, 0)))
		if t.pos+int64(n)-t.head <= t.slots {
			break
		}
		t.idle.Idle(0)
		if spins&255 == 255 && nanotime() > deadline {
			return ErrDeadline
		}
	}
	t.idle.Reset() // room is work: a time-based strategy spins again
	return nil
}

func (t *floorTx) put(ts int64) {
	off := floorHeader + int(t.pos&(t.slots-1))*t.slotSize
	s := t.b[off : off+t.size]
	t.codec.body(s[offTick:], t.pos, ts)
	copy(s[MinSize:], t.filler)
	t.pos++
	// Release: the time and filler above are visible before the stamp;
	// pairs with the subscriber's load of the stamp.
	atomic.StoreUint64(u64at(s, 0), uint64(t.pos))
}

func (t *floorTx) send(_, ts, deadline int64) error {
	if err := t.room(1, deadline); err != nil {
		return err
	}
	t.put(ts)
	return nil
}

func (t *floorTx) sendBatch(_ int64, n int, ts, deadline int64) error {
	if err := t.room(n, deadline); err != nil {
		return err
	}
	for range n {
		t.put(ts)
	}
	return nil
}

func (t *floorTx) close() error {
	if t.b == nil {
		return nil
	}
	err := shmem.Unmap(t.b)
	t.b = nil
	return err
}

type floorRx struct {
	b         []byte
	size      int
	slotSize  int
	slots     int64
	pos       int64
	published int64
	scratch   []byte
	codec     *msgCodec
	idle      rdma.IdleStrategy
}

func openFloorRx(a roleArgs, topic int) (rxPort, error) {
	b, err := shmem.Map(floorFd(topic), floorRegionSize(a.size, a.slots))
	if err != nil {
		return nil, fmt.Errorf("bench: floor region %d: %w", topic, err)
	}
	idle, _ := rdma.ParseIdle(a.idle)
	return newFloorRx(b, a.size, a.slots, idle), nil
}

// newFloorRx reads from b, a mapping of floorRegionSize(size, slots)
// bytes; its close unmaps b.
func newFloorRx(b []byte, size, slots int, idle rdma.IdleStrategy) *floorRx {
	return &floorRx{b: b, size: size, slotSize: floorSlotSize(size), slots: int64(slots), scratch: make([]byte, size), codec: newCodec(), idle: idle}
}

func (r *floorRx) next(deadline int64) (int64, int64, error) {
	off := floorHeader + int(r.pos&(r.slots-1))*r.slotSize
	s := r.b[off : off+r.size]
	stamp := u64at(s, 0)
	for spins := 0; ; spins++ {
		// Acquire: pairs with the publisher's store of the stamp.
		if atomic.LoadUint64(stamp) == uint64(r.pos+1) {
			break
		}
		if r.published != r.pos {
			// Idle: tell the publisher how far we are.
			r.published = r.pos
			atomic.StoreUint64(u64at(r.b, 0), uint64(r.pos))
		}
		r.idle.Idle(0)
		if spins&255 == 255 && nanotime() > deadline {
			return 0, 0, ErrDeadline
		}
	}
	r.idle.Reset()     // a tick is work: a time-based strategy spins again
	copy(r.scratch, s) // consume the tick
	ts, err := r.codec.decodeBody(r.scratch[offTick:])
	seq := r.pos
	r.pos++
	if r.pos&31 == 0 {
		r.published = r.pos
		// Pairs with the publisher's load of head in room.
		atomic.StoreUint64(u64at(r.b, 0), uint64(r.pos))
	}
	return seq, ts, err
}

func (r *floorRx) close() error {
	if r.b == nil {
		return nil
	}
	err := shmem.Unmap(r.b)
	r.b = nil
	return err
}

// floorCase runs the floor ring between two child processes.
type floorCase struct {
	pairCase
	regions [2]*shmem.Mapping
}

func (c *floorCase) setup(_ context.Context, cfg Config) error {
	c.transport = CaseFloor
	for i := range c.regions {
		m, err := shmem.Alloc(fmt.Sprintf("bench-floor-%d", i), floorRegionSize(cfg.Size, cfg.RingSlots))
		if err != nil {
			return err
		}
		c.regions[i] = m
		// A duplicate, so the os.File owns (and closes) its own descriptor.
		fd, err := unix.Dup(m.Fd())
		if err != nil {
			return fmt.Errorf("bench: dup floor region: %w", err)
		}
		c.files = append(c.files, os.NewFile(uintptr(fd), "floor"))
	}
	c.around = func(run func() (phase, error)) (phase, error) {
		for _, m := range c.regions {
			clear(m.Bytes()) // every run starts at position 0
		}
		return run()
	}
	return nil
}

func (c *floorCase) close() error {
	var err error
	for _, f := range c.files {
		if e := f.Close(); e != nil && err == nil {
			err = e
		}
	}
	for i, m := range c.regions {
		if m != nil {
			if e := m.Close(); e != nil && err == nil {
				err = e
			}
			c.regions[i] = nil
		}
	}
	c.files = nil
	return err
}
