package publisher

import (
	"fmt"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// homeDeviceFor returns the device a publisher claiming over provider
// connects on and the home's descriptor there: the home's own device, or
// another one on which the home's memory is registered the first time a
// publisher comes over it. Claims through shm (CPU atomics) and tcp (the
// responder's CPU atomics) on one counter are atomic with respect to each
// other; a device whose atomics are atomic only among themselves (verbs
// without IBV_ATOMIC_GLOB) is never mixed with another on one home.
func (p *Publisher) homeDeviceFor(provider string) (rdma.Device, []byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.home == nil {
		return nil, nil, ErrClosed
	}
	if provider == p.dev.Provider() {
		desc, err := p.home.Desc().MarshalBinary()
		return p.dev, desc, err
	}
	if a, ok := p.homeAlso[provider]; ok {
		return a.dev, a.desc, nil
	}
	if p.dev.Caps().Atomic != rdma.AtomicGlobal {
		return nil, nil, fmt.Errorf("%w: the home of %s is on %s, whose atomics are not atomic against %s claims; use one provider for the whole topic",
			ErrMixedProviders, p.cfg.Topic, p.dev.Provider(), provider)
	}
	dev, err := p.devs.Get(provider)
	if err != nil {
		return nil, nil, fmt.Errorf("publisher: a claim over %s: %w", provider, err)
	}
	d, mr, err := p.home.RegisterOn(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrMixedProviders, err)
	}
	desc, err := d.MarshalBinary()
	if err != nil {
		_ = mr.Close()
		return nil, nil, err
	}
	p.homeAlso[provider] = homeReg{dev: dev, mr: mr, desc: desc}
	p.log.Info().Str("provider", provider).Str("home_provider", p.dev.Provider()).Msg("publisher: home registered on a second provider")
	return dev, desc, nil
}

// grantHome gives qp's peer access to the home's region on dev.
func (p *Publisher) grantHome(qp rdma.QueuePair, dev rdma.Device, access rdma.Access) error {
	p.mu.Lock()
	var mr rdma.MemoryRegion
	switch {
	case p.home == nil:
	case dev == p.dev:
		mr = p.home.Region()
	default:
		for _, a := range p.homeAlso {
			if a.dev == dev {
				mr = a.mr
			}
		}
	}
	p.mu.Unlock()
	if mr == nil {
		return fmt.Errorf("%w: no home region on %s", ErrClosed, dev.Provider())
	}
	return ring.Grant(qp, mr, access)
}
