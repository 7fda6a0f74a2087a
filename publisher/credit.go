package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/ring"
)

// errNoCredit: the subscriber asked for its credit cell before this
// publisher added its ring (it retries).
var errNoCredit = errors.New("publisher: no credit cell for this subscriber (yet)")

// acceptCredit serves a reliable subscriber's connect to its credit cell
// (TargetPublisher; Data is the subscriber's id): a confined QP on the
// device the ring's target uses, granted write access to that ring's cell
// only (no other subscriber's cell, nothing else of this node), and the
// cell's CreditDesc as granted, so the subscriber's reader WRITEs its
// position there and the writer needs no READ to learn its room.
func (p *Publisher) acceptCredit(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	key := req.From.ID + "/" + string(req.Data)
	p.mu.Lock()
	t, w := p.targets[key], p.w
	var credit []byte
	if t != nil {
		credit = t.credit
	}
	p.mu.Unlock()
	if t == nil || credit == nil || w == nil {
		return bus.ConnectReply{}, fmt.Errorf("%w: %s", errNoCredit, key)
	}
	var cd ring.CreditDesc
	if err := cd.UnmarshalBinary(credit); err != nil {
		return bus.ConnectReply{}, fmt.Errorf("publisher: credit cell of %s: %w", key, err)
	}
	dev := t.rt.Device
	if dev == nil {
		dev = p.dev
	}
	if dev.Provider() != req.Endpoint.Provider {
		return bus.ConnectReply{}, fmt.Errorf("publisher: credit cell of %s is on %s, not %s", key, dev.Provider(), req.Endpoint.Provider)
	}
	c, err := newConn(dev)
	if err != nil {
		return bus.ConnectReply{}, err
	}
	granted, err := w.GrantCredit(c.qp, dev, cd)
	if err == nil {
		credit, err = granted.MarshalBinary()
	}
	if err != nil {
		_ = c.close()
		return bus.ConnectReply{}, fmt.Errorf("publisher: credit cell of %s: %w", key, err)
	}
	if err := c.qp.Connect(ctx, req.Endpoint); err != nil {
		_ = c.close()
		return bus.ConnectReply{}, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.close()
		return bus.ConnectReply{}, ErrClosed
	}
	p.homeAcc = append(p.homeAcc, c)
	p.mu.Unlock()
	p.log.Info().Str("subscriber", key).Msg("publisher: reliable subscriber attached its credit cell")
	return bus.ConnectReply{Endpoint: c.qp.LocalEndpoint(), Region: credit}, nil
}
