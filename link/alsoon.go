package link

import (
	"encoding"
	"errors"
	"fmt"
	"sync"

	"github.com/tickbus/tickbus/rdma"
)

// ErrClosed: the set or the registrations were closed.
var ErrClosed = errors.New("link: closed")

// Registered is a region registered on one more device: the device, the
// region there and the marshalled descriptor peers on that device use.
type Registered struct {
	Device rdma.Device
	MR     rdma.MemoryRegion
	Desc   []byte
}

// RegisterFunc registers the memory on dev and returns its descriptor there
// (marshalled) and the region; ring.Ring.RegisterOn and
// ring.Home.RegisterOn, wrapped.
type RegisterFunc func(dev rdma.Device) (desc []byte, mr rdma.MemoryRegion, err error)

// AlsoOn is one region's registrations on the devices other than its own,
// made the first time a peer comes over each provider. The zero value is
// ready. Safe for concurrent use.
type AlsoOn struct {
	mu     sync.Mutex
	regs   map[string]Registered
	closed bool
}

// Get returns the registration on provider's device, registering with
// register on first use; created says this call made it.
func (a *AlsoOn) Get(devs *Devices, provider string, register RegisterFunc) (r Registered, created bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return Registered{}, false, ErrClosed
	}
	if r, ok := a.regs[provider]; ok {
		return r, false, nil
	}
	dev, err := devs.Get(provider)
	if err != nil {
		return Registered{}, false, err
	}
	desc, mr, err := register(dev)
	if err != nil {
		return Registered{}, false, fmt.Errorf("link: register on %s: %w", provider, err)
	}
	if a.regs == nil {
		a.regs = map[string]Registered{}
	}
	r = Registered{Device: dev, MR: mr, Desc: desc}
	a.regs[provider] = r
	return r, true, nil
}

// Close closes every registration; later Gets fail with ErrClosed.
// Idempotent. Close it before the memory it registers goes.
func (a *AlsoOn) Close() error {
	a.mu.Lock()
	regs := a.regs
	a.regs = nil
	a.closed = true
	a.mu.Unlock()
	var errs []error
	for _, r := range regs {
		errs = append(errs, r.MR.Close())
	}
	return errors.Join(errs...)
}

// Marshalled makes a RegisterFunc of a region's RegisterOn that returns
// its descriptor (ring.Ring.RegisterOn, ring.Home.RegisterOn): the
// descriptor is marshalled, and the region closed if that fails.
func Marshalled[D encoding.BinaryMarshaler](registerOn func(rdma.Device) (D, rdma.MemoryRegion, error)) RegisterFunc {
	return func(dev rdma.Device) ([]byte, rdma.MemoryRegion, error) {
		d, mr, err := registerOn(dev)
		if err != nil {
			return nil, nil, err
		}
		desc, err := d.MarshalBinary()
		if err != nil {
			_ = mr.Close()
			return nil, nil, err
		}
		return desc, mr, nil
	}
}

// Forget drops every registration without closing it and returns the
// regions' Close functions, for a caller that keeps them until nothing can
// land through them any more (a retired home: peers may still hold its
// descriptor). Later Gets register afresh.
func (a *AlsoOn) Forget() []func() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var closes []func() error
	for _, r := range a.regs {
		closes = append(closes, r.MR.Close)
	}
	a.regs = nil
	return closes
}
