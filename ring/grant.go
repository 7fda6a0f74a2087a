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

// Grant gives qp's peer access to all of mr where the provider can confine
// queue pairs, and returns the RemoteRegion that peer names mr by: the
// grant's, whose rkey works on qp alone on verbs (a memory window's) and is
// checked per queue pair on shm and tcp. The descriptor a connection's
// peer is sent must carry that rkey (RingDesc.WithRKey, HomeDesc.WithRKey),
// never the region's own. Where the device cannot confine
// (rdma.ErrNotSupported: every queue pair of the device reaches every
// remote region, as SECURITY.md says of verbs without type 2B windows) it
// grants nothing and returns mr.Remote().
func Grant(qp rdma.QueuePair, mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	rr, err := qp.Grant(mr, access)
	switch {
	case errors.Is(err, rdma.ErrNotSupported):
		return mr.Remote(), nil
	case err != nil:
		return rdma.RemoteRegion{}, fmt.Errorf("ring: grant region %#x (%s) to QP %d: %w", mr.RKey(), access, qp.Num(), err)
	case rr.Addr != mr.Addr() || rr.Len != uint64(len(mr.Bytes())):
		return rdma.RemoteRegion{}, fmt.Errorf("ring: grant region %#x to QP %d: %w: the grant covers %d bytes at %#x, not the region's %d at %#x",
			mr.RKey(), qp.Num(), rdma.ErrGrant, rr.Len, rr.Addr, len(mr.Bytes()), mr.Addr())
	}
	return rr, nil
}
