package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/bus"
)

// errNoCredit: the subscriber asked for its credit cell before this
// publisher added its ring (it retries).
var errNoCredit = errors.New("publisher: no credit cell for this subscriber (yet)")

// acceptCredit serves a reliable subscriber's connect to its credit cell
// (TargetPublisher; Data is the subscriber's id): a QP on the device the
// ring's target uses, and the cell's CreditDesc, so the subscriber's
// reader WRITEs its position there and the writer needs no READ to learn
// its room.
func (p *Publisher) acceptCredit(ctx context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
	key := req.From.ID + "/" + string(req.Data)
	p.mu.Lock()
	t := p.targets[key]
	var credit []byte
	if t != nil {
		credit = t.credit
	}
	p.mu.Unlock()
	if t == nil || credit == nil {
		return bus.ConnectReply{}, fmt.Errorf("%w: %s", errNoCredit, key)
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
