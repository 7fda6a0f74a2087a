package subscriber

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
)

// deviceFor returns the device a publisher connecting over provider uses
// and the ring's descriptor on it: the ring's own device, or another one
// on which the same memory is registered the first time a publisher comes
// over it (shm publishers on this host, tcp ones elsewhere, one ring), and
// the ring's region on that device, which the publisher's QP is granted.
func (s *Subscriber) deviceFor(provider string) (rdma.Device, rdma.MemoryRegion, []byte, error) {
	if provider == s.dev.Provider() {
		desc, err := s.ring.Desc().MarshalBinary()
		return s.dev, s.ring.Region(), desc, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, nil, ErrClosed
	}
	r, created, err := s.also.Get(s.devs, provider, link.Marshalled(s.ring.RegisterOn))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: publisher came over %s: %w", ErrRefused, provider, err)
	}
	if created {
		s.log.Info().Str("provider", provider).Str("ring_provider", s.dev.Provider()).Msg("subscriber: ring registered on a second provider")
	}
	return r.Device, r.MR, r.Desc, nil
}

// providersInUse is the set of providers publishers write into the ring
// through now, sorted and joined with "+" ("shm", "tcp", "shm+tcp"; ""
// with no publisher), and whether any publisher is on another host.
func (s *Subscriber) providersInUse() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	cross := false
	for _, cs := range s.qps {
		for _, c := range cs {
			set[c.provider] = true
			cross = cross || c.host != s.node.HostID()
		}
	}
	return joinProviders(set), cross
}

// joinProviders sorts the set fastest first and joins it with "+".
func joinProviders(set map[string]bool) string {
	ps := make([]string, 0, len(set))
	for p := range set {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return rank(ps[i]) < rank(ps[j]) })
	return strings.Join(ps, "+")
}

// ProvidersUsed is every provider a publisher connected over since New,
// as Providers formats it; it stays after the publishers left.
func (s *Subscriber) ProvidersUsed() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return joinProviders(s.used)
}

// rank orders providers fastest first (shm, verbs, tcp), then by name.
func rank(p string) string {
	switch p {
	case rdma.ProviderShm:
		return "0"
	case rdma.ProviderVerbs:
		return "1"
	case rdma.ProviderTCP:
		return "2"
	}
	return "3" + p
}

// Providers is the set of providers publishers write into the ring through
// now, as in the stats message ("shm", "tcp", "shm+tcp"; "" with none).
func (s *Subscriber) Providers() string {
	p, _ := s.providersInUse()
	return p
}
