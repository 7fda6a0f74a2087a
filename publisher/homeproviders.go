package publisher

import (
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/link"
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
func (p *Publisher) homeDeviceFor(provider string) (rdma.Device, rdma.MemoryRegion, []byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.home == nil {
		return nil, nil, nil, ErrClosed
	}
	if provider == p.dev.Provider() {
		desc, err := p.home.Desc().MarshalBinary()
		return p.dev, p.home.Region(), desc, err
	}
	if p.dev.Caps().Atomic != rdma.AtomicGlobal {
		return nil, nil, nil, fmt.Errorf("%w: the home of %s is on %s, whose atomics are not atomic against %s claims; use one provider for the whole topic",
			ErrMixedProviders, p.cfg.Topic, p.dev.Provider(), provider)
	}
	r, created, err := p.homeAlso.Get(p.devs, provider, link.Marshalled(p.home.RegisterOn))
	if err != nil {
		if errors.Is(err, ring.ErrDeviceAtomics) {
			err = fmt.Errorf("%w: %w", ErrMixedProviders, err)
		}
		return nil, nil, nil, fmt.Errorf("publisher: a claim over %s: %w", provider, err)
	}
	if created {
		p.log.Info().Str("provider", provider).Str("home_provider", p.dev.Provider()).Msg("publisher: home registered on a second provider")
	}
	return r.Device, r.MR, r.Desc, nil
}
