package publisher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// connectHome connects the writer's QP to the home (a loopback pair when
// the home is here) and makes the writer.
//
// The home the bus named may be gone by the time we dial it (it lost its
// lease, was killed, or its record outlived it after a server restart:
// "node X has no home"), so a failed dial asks the bus for the current
// home again, as failover does, for up to ConnectTimeout+FailoverTimeout
// (and ctx).
func (p *Publisher) connectHome(ctx context.Context) error {
	hi := p.pub.Home()
	deadline := time.Now().Add(p.cfg.ConnectTimeout + p.cfg.FailoverTimeout)
	var w *ring.Writer
	for {
		timeout := min(p.cfg.ConnectTimeout, max(time.Until(deadline), 100*time.Millisecond))
		var qp rdma.QueuePair
		var cq rdma.CompletionQueue
		var err error
		w, qp, cq, err = p.dialHome(ctx, hi, timeout)
		if err == nil {
			p.cq, p.homeQP = cq, qp
			break
		}
		if qp != nil {
			_ = qp.Close()
		}
		if cq != nil {
			_ = cq.Close()
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		p.log.Info().Err(err).Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Msg("publisher: the home named is not reachable; asking for the current one")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		nhi, rerr := p.pub.Rehome(rctx)
		cancel()
		if errors.Is(rerr, bus.ErrClosed) {
			return err
		}
		if rerr == nil {
			hi = nhi
		}
	}
	p.mu.Lock()
	p.w, p.epoch = w, hi.Epoch
	if hi.Reserved != 0 {
		w.SetLimit(hi.Reserved)
	}
	if p.homeLost {
		w.SetLimit(0) // the home went while we connected: the first publish fails over
	}
	p.mu.Unlock()
	return nil
}

// dialHome connects a new QP to the home hi and makes a writer on it. On
// error the QP and CQ made so far are returned for the caller to close.
func (p *Publisher) dialHome(ctx context.Context, hi bus.HomeInfo, timeout time.Duration) (w *ring.Writer, qp rdma.QueuePair, cq rdma.CompletionQueue, err error) {
	var hd ring.HomeDesc
	if err := hd.UnmarshalBinary(hi.Descriptor); err != nil {
		return nil, qp, cq, fmt.Errorf("publisher: home descriptor from %s: %w", hi.Node.ID, err)
	}
	dev := p.dev // a home here: a loopback pair on its own device
	if !hi.Local {
		d, err := p.devs.Get(p.node.ProviderFor(hi.Node))
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: the home on %s: %w", hi.Node.ID, err)
		}
		dev = d
	}
	hc, err := link.OpenConfined(dev, link.Writer) // the home reaches nothing here
	if err != nil {
		return nil, nil, nil, fmt.Errorf("publisher: %w", err)
	}
	cq, qp = hc.CQ, hc.QP
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if hi.Local {
		// the home's side of a loopback pair: its peer is our own writer
		// (the home may be another Publisher's of this node), so it is not
		// confined and the writer names the home by the record's rkey.
		// Where a region's own rkey reaches nothing (rdma.Caps.GrantOnly:
		// verbs with memory windows) our own home is granted to the pair
		// instead, and the writer names it by that grant's rkey; another
		// Publisher's home is not ours to grant. (Elsewhere the pair stays
		// unconfined: tcp then claims by CPU atomics, not over the wire.)
		var peer conn
		if dev.Caps().GrantOnly {
			p.mu.Lock()
			own := p.home
			p.mu.Unlock()
			if own == nil || !own.Desc().SameRegion(hd) {
				return nil, qp, cq, fmt.Errorf("publisher: %w: the home of %s is another Publisher's of this node, on a %s device whose regions only grants reach; publish on this topic from one Publisher per node",
					rdma.ErrNotSupported, p.cfg.Topic, dev.Provider())
			}
			peer, err = newConn(dev)
			if err == nil {
				var rr rdma.RemoteRegion
				if rr, err = ring.Grant(peer.qp, own.Region(), rdma.AccessRemote); err == nil {
					hd = hd.WithRKey(rr.RKey)
				} else {
					_ = peer.close()
				}
			}
		} else {
			peer, err = newOpenConn(dev)
		}
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: %w", err)
		}
		p.mu.Lock()
		p.homeAcc = append(p.homeAcc, peer)
		p.mu.Unlock()
		errc := make(chan error, 1)
		go func() { errc <- peer.qp.Connect(cctx, qp.LocalEndpoint()) }()
		if err := qp.Connect(cctx, peer.qp.LocalEndpoint()); err != nil {
			<-errc
			return nil, qp, cq, fmt.Errorf("publisher: loopback to the home: %w", err)
		}
		if err := <-errc; err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: loopback to the home: %w", err)
		}
	} else {
		rep, err := p.node.Connect(cctx, hi.Node.ID, bus.ConnectRequest{Topic: p.cfg.Topic, Kind: bus.TargetHome, ID: homeClaimer, Endpoint: qp.LocalEndpoint()})
		if err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: connect to the home on %s: %w", hi.Node.ID, err)
		}
		if err := qp.Connect(cctx, rep.Endpoint); err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: connect to the home on %s: %w", hi.Node.ID, err)
		}
		// The home's region as registered on this provider's device.
		var rd ring.HomeDesc
		if err := rd.UnmarshalBinary(rep.Region); err != nil {
			return nil, qp, cq, fmt.Errorf("publisher: home descriptor in the connect reply from %s: %w", hi.Node.ID, err)
		}
		if rd.Epoch != hd.Epoch || rd.SlotSize != hd.SlotSize || rd.JournalSlots != hd.JournalSlots {
			return nil, qp, cq, fmt.Errorf("publisher: the home on %s answered with another home's descriptor", hi.Node.ID)
		}
		hd = rd
	}
	p.log.Info().Str("home", hi.Node.ID).Str("home_host", hi.Node.HostID).Bool("local", hi.Local).Str("provider", dev.Provider()).
		Msg("publisher: claims go to the home")
	// Our own home: while no other publisher connects (acceptHome Shares
	// it first), the writer claims from runs reserved ahead (ring's solo
	// claims: no locked op per claim).
	var solo *ring.Home
	if hi.Local {
		p.mu.Lock()
		if p.home != nil && p.home.Desc().SameRegion(hd) {
			solo = p.home
		}
		p.mu.Unlock()
	}
	w, err = ring.NewWriter(ring.WriterConfig{Device: dev, CQ: cq, HomeQP: qp, Home: hd, SoloHome: solo, PublisherID: p.cfg.PublisherID,
		Claim: p.cfg.Claim, MaxBatch: p.cfg.MaxBatch, Timeout: p.cfg.Timeout, Idle: p.cfg.Idle,
		ArbitrationWindow: p.cfg.ArbitrationWindow, OnTargetDropped: p.onTargetDropped, Logger: p.cfg.Logger})
	if err != nil {
		return nil, qp, cq, fmt.Errorf("publisher: %w", err)
	}
	if hi.Local {
		// a home of this process: no claim on it is written once it may
		// have lost its lease (a stall past it; see onLease)
		w.SetLeaseEnd(p.pub.LeaseEnd(hi.Epoch))
	}
	return w, qp, cq, nil
}
