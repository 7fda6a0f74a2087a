package publisher

import (
	"context"
	"errors"

	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
)

type conn struct {
	qp rdma.QueuePair
	cq rdma.CompletionQueue
}

func (c conn) close() error {
	var errs []error
	if c.qp != nil {
		errs = append(errs, c.qp.Close())
	}
	if c.cq != nil {
		errs = append(errs, c.cq.Close())
	}
	return errors.Join(errs...)
}

// loopback connects two fresh confined queue pairs on the home's device
// to each other, after grant (if not nil) gave b's peer what it needs.
func (p *Publisher) loopback(ctx context.Context, grant func(b rdma.QueuePair) error) (conn, conn, error) {
	a, err := newConn(p.dev)
	if err != nil {
		return conn{}, conn{}, err
	}
	b, err := newConn(p.dev)
	if err == nil && grant != nil {
		if err = grant(b.qp); err != nil {
			_ = b.close()
		}
	}
	if err != nil {
		_ = a.close()
		return conn{}, conn{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- b.qp.Connect(cctx, a.qp.LocalEndpoint()) }()
	err = a.qp.Connect(cctx, b.qp.LocalEndpoint())
	if berr := <-errc; err == nil {
		err = berr
	}
	if err != nil {
		_ = a.close()
		_ = b.close()
		return conn{}, conn{}, err
	}
	return a, b, nil
}

// newConn makes a confined queue pair: its peer reaches only what is
// granted to it (the home's region, a reliable subscriber's credit cells),
// or nothing.
func newConn(dev rdma.Device) (conn, error) {
	c, err := link.OpenConfined(dev, link.Writer)
	return conn{qp: c.QP, cq: c.CQ}, err
}

// newOpenConn makes a queue pair whose peer reaches every remote region of
// dev: only for a loopback pair within this process.
func newOpenConn(dev rdma.Device) (conn, error) {
	c, err := link.Open(dev, link.Writer)
	return conn{qp: c.QP, cq: c.CQ}, err
}
