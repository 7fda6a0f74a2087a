package ring

import (
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// RegisterOn registers the ring's memory on another device of this process
// as well, so that writers on that device reach the same ring (shm
// publishers on this host and tcp ones elsewhere, in one topic). It
// returns the descriptor writers on dev need and the region, which the
// caller must close before Close; the reader is the ring's one reader.
func (r *Ring) RegisterOn(dev rdma.Device) (RingDesc, rdma.MemoryRegion, error) {
	if dev == nil {
		return RingDesc{}, nil, fmt.Errorf("%w: device is nil", ErrInvalidConfig)
	}
	size := int(r.desc.Region.Len)
	mr, err := dev.Register(r.mr.Bytes()[:size], rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	if err != nil {
		return RingDesc{}, nil, fmt.Errorf("ring: register the ring on %s too: %w", dev.Provider(), err)
	}
	d := r.desc
	d.Region = mr.Remote()
	d.Region.Len = uint64(size)
	return d, mr, nil
}

// RegisterOn registers the home's memory (counter and journal) on another
// device of this process as well, so that writers on that device claim on
// the same counter. Both devices' atomics must be atomic against CPU
// atomics (rdma.AtomicGlobal: shm and tcp are), since claims arrive
// through both: a device whose atomics are atomic only among themselves
// (rdma.AtomicHCA) is refused with ErrDeviceAtomics. The caller closes the
// returned region before Close.
func (h *Home) RegisterOn(dev rdma.Device) (HomeDesc, rdma.MemoryRegion, error) {
	if dev == nil {
		return HomeDesc{}, nil, fmt.Errorf("%w: device is nil", ErrInvalidConfig)
	}
	if c := dev.Caps().Atomic; c != rdma.AtomicGlobal {
		return HomeDesc{}, nil, fmt.Errorf("%w: %s device's atomics are not atomic against the other devices' claims on one home",
			ErrDeviceAtomics, dev.Provider())
	}
	size := int(h.desc.Region.Len)
	mr, err := dev.Register(h.mr.Bytes()[:size], rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		return HomeDesc{}, nil, fmt.Errorf("ring: register the home on %s too: %w", dev.Provider(), err)
	}
	d := h.desc
	d.Region = mr.Remote()
	d.Region.Len = uint64(size)
	return d, mr, nil
}
