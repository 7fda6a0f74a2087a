package link

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// ErrUnsupported: a provider this build cannot open (verbs needs the verbs
// build tag and a device).
var ErrUnsupported = errors.New("link: provider not available in this build")

// DevicesConfig configures a Devices set.
type DevicesConfig struct {
	// HostID names this host in endpoints; it must match the bus node's.
	HostID string
	// TCPListen is the tcp provider's listen address (default 127.0.0.1:0);
	// TCPAdvertise the address put in endpoints if peers reach it otherwise.
	TCPListen    string
	TCPAdvertise string
	Logger       zerolog.Logger
	// Wrap, if set, is applied to each device as it is opened, and the set
	// hands out what it returns: tests run the product over an emulation
	// (internal/rdmawin: verbs-like per-queue-pair rkeys over tcp).
	Wrap func(rdma.Device) rdma.Device
}

// Devices is the devices of one process. Safe for concurrent use.
type Devices struct {
	cfg    DevicesConfig
	mu     sync.Mutex
	devs   map[string]rdma.Device
	closed bool
}

// New returns an empty set.
func NewDevices(cfg DevicesConfig) *Devices {
	return &Devices{cfg: cfg, devs: map[string]rdma.Device{}}
}

// Providers are the providers this build can open, in preference order.
func Providers() []string { return []string{rdma.ProviderShm, rdma.ProviderTCP} }

// Get returns the device of provider, opening it on first use.
func (s *Devices) Get(provider string) (rdma.Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if d, ok := s.devs[provider]; ok {
		return d, nil
	}
	var (
		d   rdma.Device
		err error
	)
	switch provider {
	case rdma.ProviderShm:
		d, err = shm.Open(shm.Config{HostID: s.cfg.HostID, Logger: s.cfg.Logger})
	case rdma.ProviderTCP:
		// DirectLoopback: a publisher's claims on a home in its own process
		// are CPU atomics on its counter, not round trips through the socket.
		d, err = tcp.Open(tcp.Config{HostID: s.cfg.HostID, Listen: s.cfg.TCPListen, Advertise: s.cfg.TCPAdvertise, Logger: s.cfg.Logger,
			DirectLoopback: true})
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, provider)
	}
	if err != nil {
		return nil, fmt.Errorf("link: open %s: %w", provider, err)
	}
	if s.cfg.Wrap != nil {
		d = s.cfg.Wrap(d)
	}
	s.devs[provider] = d
	return d, nil
}

// Close closes every device opened. Idempotent.
func (s *Devices) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, d := range s.devs {
		errs = append(errs, d.Close())
	}
	s.devs = nil
	return errors.Join(errs...)
}
