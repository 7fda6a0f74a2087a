package ring

import (
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Region is the ring's memory as registered on its own device: what a
// subscriber grants the queue pair of each publisher it admits.
func (r *Ring) Region() rdma.MemoryRegion { return r.mr }

// Region is the home's counter and journal as registered on its own
// device: what the home grants the queue pairs of admitted peers.
func (h *Home) Region() rdma.MemoryRegion { return h.mr }

// Confine sets cfg.Confined when dev can confine a queue pair to its
// grants (rdma.Caps.GrantPerQP): the peer then reaches only what Grant
// gives it.
func Confine(dev rdma.Device, cfg rdma.QPConfig) rdma.QPConfig {
	cfg.Confined = dev.Caps().GrantPerQP
	return cfg
}

// Grant gives qp's peer access to mr where the provider can confine queue
// pairs, and does nothing where it cannot (rdma.ErrNotSupported: every
// queue pair of the device reaches every remote region, as SECURITY.md
// says of verbs).
func Grant(qp rdma.QueuePair, mr rdma.MemoryRegion, access rdma.Access) error {
	if _, err := qp.Grant(mr, access); err != nil && !errors.Is(err, rdma.ErrNotSupported) {
		return fmt.Errorf("ring: grant region %#x (%s) to QP %d: %w", mr.RKey(), access, qp.Num(), err)
	}
	return nil
}
