package subscriber

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

type conn struct {
	qp       rdma.QueuePair
	cq       rdma.CompletionQueue
	provider string
	host     string // the publisher's host id
}

// accept serves a publisher's connect: a queue pair on the ring's device,
// connected to the publisher's, granted the ring, and the ring's
// descriptor naming it by that grant's rkey.
func (s *Subscriber) accept(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	prov := req.Endpoint.Provider
	dev, mr, desc, err := s.deviceFor(prov)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	// the publisher's peer reaches the ring, nothing else of this device,
	// and is told the ring by the rkey of this grant (on verbs a memory
	// window bound to this QP alone): the announced descriptor's rkey works
	// on no queue pair
	lc, err := link.OpenConfined(dev, link.Responder)
	if err == nil {
		var rr rdma.RemoteRegion
		if rr, err = ring.Grant(lc.QP, mr, mr.Access()&rdma.AccessRemote); err == nil {
			desc, err = ring.WithRKey(desc, rr.RKey) // a copy: desc is every connection's
		}
		if err != nil {
			_ = lc.Close()
		}
	}
	if err != nil {
		return bus.ConnectReply{}, err
	}
	qp, cq := lc.QP, lc.CQ
	if err := qp.Connect(ctx, req.Endpoint); err != nil {
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, err
	}
	if s.h.joinedAt.Load() == 0 {
		s.learnStart(ctx, req.From)
		s.spawn(func() { s.unstick(req.From) })
	}
	key := publisherKey(req)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = qp.Close()
		_ = cq.Close()
		return bus.ConnectReply{}, ErrClosed
	}
	s.qps[key] = append(s.qps[key], conn{qp: qp, cq: cq, provider: prov, host: req.From.HostID})
	s.used[prov] = true
	s.mu.Unlock()
	s.h.extend(s.cfg.JoinGrace)
	if s.cfg.Mode == ring.Reliable && prov == s.dev.Provider() && len(req.Data) > 0 {
		s.spawn(func() { s.attachCredit(req.From, string(req.Data)) }) // Data: the publisher's id
	}
	s.log.Info().Str("publisher", key).Str("provider", prov).Str("publisher_host", req.From.HostID).Msg("subscriber: publisher connected")
	return bus.ConnectReply{Endpoint: qp.LocalEndpoint(), Region: desc}, nil
}

// publisherUp notes a publisher: until it delivers a tick (or JoinGrace
// after it connected) the ring is joining it.
func (s *Subscriber) publisherUp(p bus.PublisherInfo) {
	if len(p.Data) == 4 {
		s.h.publisherUp(binary.LittleEndian.Uint32(p.Data), s.cfg.JoinGrace)
	}
	s.log.Info().Str("publisher", p.Key()).Msg("subscriber: publisher up")
}

// publisherKey is the key of the publisher a connect request comes from,
// as bus.PublisherInfo.Key names it (publisherGone looks it up): the
// node's id and the publisher's id, which its connect request carries in
// Data (req.ID is this ring's id). A request without one is keyed by the
// ring's id.
func publisherKey(req bus.ConnectRequest) string {
	if len(req.Data) > 0 {
		return req.From.ID + "/" + string(req.Data)
	}
	return req.From.ID + "/" + req.ID
}

// connectedTo reports whether the publisher key still has queue pairs to
// the ring (publisherGone removes them).
func (s *Subscriber) connectedTo(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.qps[key]) > 0
}

// attachCredit connects a queue pair to the credit cell the publisher
// keeps for this ring and gives it to the reader, which then WRITEs its
// position there; until then (or if this fails) the publisher READs the
// ring's head when the ring looks full. It retries, each attempt bounded,
// for as long as the publisher stays connected: on a loaded host the
// publisher may add the ring (and its cell) seconds after our accept.
func (s *Subscriber) attachCredit(from bus.PeerInfo, pubID string) {
	defer s.wg.Done()
	key := from.ID + "/" + pubID
	// confined: the publisher reaches nothing of this node through it
	qp, err := s.dev.CreateQP(ring.Confine(s.dev, rdma.QPConfig{SendCQ: s.cq, RecvCQ: s.cq, SendDepth: 64, RecvDepth: 16}))
	if err != nil {
		return
	}
	ctx, cancel := s.untilClosed()
	defer cancel()
	// the publisher adds the ring (and its cell) after our accept returns
	rep, err := s.connectRetrying(ctx, from.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetPublisher, ID: pubID,
		Endpoint: qp.LocalEndpoint(), Data: []byte(s.cfg.ID)}, "credit cell (the publisher reads the ring's head meanwhile)",
		func() error {
			if !s.connectedTo(key) {
				return errPublisherGone
			}
			return nil
		}, nil)
	if err != nil {
		_ = qp.Close()
		if errors.Is(err, errPublisherGone) {
			s.log.Info().Str("publisher", key).Msg("subscriber: publisher gone before its credit cell was attached")
		}
		return
	}
	var cd ring.CreditDesc
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if err = qp.Connect(cctx, rep.Endpoint); err == nil {
		if err = cd.UnmarshalBinary(rep.Region); err == nil {
			err = s.reader.AddCredit(qp, cd)
		}
	}
	if err != nil {
		_ = qp.Close()
		s.log.Info().Err(err).Str("publisher", key).Msg("subscriber: credit cell not attached")
		return
	}
	if !s.keepQP(qp) {
		return
	}
	s.credits.Add(1)
	s.log.Info().Str("publisher", key).Msg("subscriber: credit cell attached")
}

// publisherGone closes the queue pairs of a publisher that left, or whose
// node the bus lost by heartbeat (bus.ErrPeerLost) while they were down,
// or after the bus held it (publisherReachable) until they failed
// (bus.ErrHoldFailed) or the hold ended (bus.ErrHoldEnded). One that went
// without withdrawing may have stopped writing to the ring before its
// last ticks: the topic's counter is asked for, so that what never comes
// is named (learnTail).
func (s *Subscriber) publisherGone(p bus.PublisherInfo, reason error) {
	key := p.Key()
	s.mu.Lock()
	cs := s.qps[key]
	delete(s.qps, key)
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.qp.Close()
		_ = c.cq.Close()
	}
	if errors.Is(reason, bus.ErrHoldFailed) || errors.Is(reason, bus.ErrHoldEnded) {
		s.log.Warn().Str("publisher", key).Err(reason).Msg("subscriber: publisher gone")
	} else {
		s.log.Info().Str("publisher", key).Err(reason).Msg("subscriber: publisher gone")
	}
	if !errors.Is(reason, bus.ErrWithdrawn) {
		s.spawn(func() { s.learnTail(p) })
	}
}

// publisherReachable is the bus's liveness check for a publisher whose
// node it lost by heartbeat (bus.SubscribeSpec.PublisherReachable): while
// one of its queue pairs is up (an older one of a reconnect may have
// failed long ago) the bus holds it and the queue pairs stay, so a node
// away from NATS goes on writing. A closing subscriber holds nothing.
func (s *Subscriber) publisherReachable(p bus.PublisherInfo) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closing && anyUp(s.qps[p.Key()])
}

// onPublisherUnheard: the bus holds p (publisherReachable).
func (s *Subscriber) onPublisherUnheard(p bus.PublisherInfo, hold time.Duration) {
	s.log.Warn().Str("publisher", p.Key()).Err(bus.ErrPeerLost).Dur("hold", hold).
		Msg("subscriber: publisher's node unheard on NATS, but its queue pairs are up; keeping them until they fail or the hold ends")
}

// onPublisherHeard: a held publisher's node re-announced it unchanged.
func (s *Subscriber) onPublisherHeard(p bus.PublisherInfo, unheard time.Duration) {
	s.log.Info().Str("publisher", p.Key()).Dur("unheard", unheard).
		Msg("subscriber: publisher's node heard again; its queue pairs never stopped")
}

// anyUp reports whether one of the queue pairs is in RTS (the provider's
// liveness: tcp connection, shm peer, verbs QP state).
func anyUp(cs []conn) bool {
	for _, c := range cs {
		if c.qp.State() == rdma.QPReadyToSend {
			return true
		}
	}
	return false
}
