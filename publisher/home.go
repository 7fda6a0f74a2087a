package publisher

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// newHome makes the topic's sequencer here, its counter at start (above
// every sequence an earlier home handed out). A home of an earlier epoch
// held here is retired: closed at Close.
func (p *Publisher) newHome(ctx context.Context, topic string, start uint64) ([]byte, error) {
	h, err := ring.NewHome(p.dev, ring.HomeConfig{JournalSlots: p.cfg.JournalSlots, SlotSize: p.cfg.SlotSize, Start: start, Logger: p.cfg.Logger})
	if err != nil {
		return nil, err
	}
	desc, err := h.Desc().MarshalBinary()
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	// A queue pair of our own to the counter, to fence it (FenceCounter)
	// when the lease is lost: any goroutine but the publishing one. Its
	// peer is granted the counter's word, for atomics, and nothing else.
	fenceDesc := h.Desc()
	fence, peer, err := p.loopback(ctx, func(b rdma.QueuePair) error {
		rr, err := b.GrantRange(h.Region(), int(fenceDesc.CounterAddr()-fenceDesc.Region.Addr), 8, rdma.AccessRemoteAtomic)
		if errors.Is(err, rdma.ErrNotSupported) {
			return nil // every QP of the device reaches the home
		}
		if err == nil {
			fenceDesc.Region.RKey = rr.RKey // a memory window's on verbs
		}
		return err
	})
	if err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("publisher: the home's fence queue pair: %w", err)
	}
	p.mu.Lock()
	if old := p.home; old != nil {
		p.retired = append(p.retired, old.Close)
	}
	// The old home's registrations on other devices describe the old
	// home: a claimant over tcp must get this one's (i9t: the chaos test
	// found New failing with "another home's descriptor").
	p.retired = append(p.retired, p.homeAlso.Forget()...)
	p.retired = append(p.retired, p.fence.close)
	p.home, p.homeDesc, p.fence, p.fenceDesc = h, desc, fence, fenceDesc
	p.homeAcc = append(p.homeAcc, peer)
	p.mu.Unlock()
	p.log.Info().Uint64("start", start).Msg("publisher: this node is the topic's home")
	return desc, nil
}

// fenceHome stops our home (if desc is it) from granting claims: every
// later claim, remote ones included, is refused by its writer's limit
// check. Called when the lease is lost, before it can expire, and at Close.
// It returns the counter's value before the fence, and whether it fenced.
func (p *Publisher) fenceHome(desc []byte) (uint64, bool) {
	p.mu.Lock()
	h, fence, fd := p.home, p.fence, p.fenceDesc
	mine := h != nil && fence.qp != nil && sameHome(desc, p.homeDesc)
	p.mu.Unlock()
	if !mine {
		return 0, false
	}
	before, err := ring.FenceCounter(p.dev, fence.qp, fence.cq, fd, time.Second)
	if err != nil {
		p.log.Warn().Err(err).Msg("publisher: could not fence the home's counter; claimants stop at its reservation")
		return 0, false
	}
	p.log.Info().Uint64("counter", before).Msg("publisher: fenced the home's counter")
	return before, true
}

// homeClaimer is the ConnectRequest.ID of a publisher's connect to the
// home: it will claim (a subscriber's connect, for journal READs, has none).
const homeClaimer = "claims"

// acceptHome serves another publisher's connect to our home.
func (p *Publisher) acceptHome(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	dev, mr, desc, err := p.homeDeviceFor(req.Endpoint.Provider)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	c, err := newConn(dev)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	// the peer reaches the home's region only: all of it for a publisher
	// that comes to claim (claims and journal writes), reads for anyone
	// else (a subscriber's journal and counter READs)
	access := rdma.AccessRemoteRead
	if req.ID == homeClaimer && p.node.Authorization().CanPublish(req.From.Key, p.cfg.Topic) {
		access = rdma.AccessRemote
		// Before the counter is granted: our solo writer (if any) gives
		// back the run it reserved ahead and claims the shared way from
		// now on, so no sequence is left a hole (ring.Home.Share).
		p.mu.Lock()
		h := p.home
		p.mu.Unlock()
		if h != nil {
			h.Share()
		}
	}
	// the reply names the region by this grant's rkey (on verbs a memory
	// window bound to this QP alone), in a copy of the shared descriptor
	rr, err := ring.Grant(c.qp, mr, access)
	if err == nil {
		desc, err = ring.WithRKey(desc, rr.RKey)
	}
	if err != nil {
		_ = c.close()
		return bus.ConnectReply{}, err
	}
	if err := c.qp.Connect(ctx, req.Endpoint); err != nil {
		_ = c.close()
		return bus.ConnectReply{}, err
	}
	p.mu.Lock()
	if p.closed || p.home == nil {
		p.mu.Unlock()
		_ = c.close()
		return bus.ConnectReply{}, ErrClosed
	}
	p.homeAcc = append(p.homeAcc, c)
	// The counter as read now: a subscriber joining a running topic starts
	// its ring here (ring.Reader.StartAt). Then the epoch's start: a
	// subscriber asking after its home died may hear this home before its
	// record, and a counter at (or just past) a new epoch's start is that
	// epoch's, not a claim of the ended one.
	var counter [16]byte
	binary.LittleEndian.PutUint64(counter[:8], p.home.Counter())
	binary.LittleEndian.PutUint64(counter[8:], p.home.Desc().Start)
	p.mu.Unlock()
	p.log.Info().Str("peer", req.From.ID).Str("peer_host", req.From.HostID).Str("provider", dev.Provider()).Msg("publisher: connected to the home")
	return bus.ConnectReply{Endpoint: c.qp.LocalEndpoint(), Region: desc, Data: counter[:]}, nil
}

// sameHome reports whether the wire-form home descriptors a and b (a home
// record's, a connect reply's, our own) describe the same home: equal in
// all but the rkey, which names the region as one connection's grant. Any
// that does not decode is no home of ours.
func sameHome(a, b []byte) bool {
	var x, y ring.HomeDesc
	return x.UnmarshalBinary(a) == nil && y.UnmarshalBinary(b) == nil && x.SameRegion(y)
}
