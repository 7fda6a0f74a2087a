package tickbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
)

// Client is one process's presence on a tickbus: a NATS connection (an
// embedded server by default) for the control plane, and the devices its
// publishers and subscriptions reach their peers through. Safe for
// concurrent use; Close releases everything it made.
type Client struct {
	node *bus.Node
	devs *link.Devices
	opts options
	log  zerolog.Logger

	mu     sync.Mutex
	closed bool
	pubs   map[*Publisher]struct{}
	subs   map[*Subscription]struct{}
	pats   map[*PatternSubscription]struct{}
	done   chan struct{}
	ending chan struct{} // closed when Close begins: Run returns
	// making counts publishers and subscriptions being made (begin): Close
	// waits for them before it closes the devices they use.
	making sync.WaitGroup
	// topicPubs are Client.Publish's publishers by topic, copied on write
	// under mu.
	topicPubs atomic.Pointer[map[string]*topicPub]

	closeOnce sync.Once
	closeErr  error
}

// Connect joins the bus: it connects to NATS (WithNATS; by default it
// runs an embedded server on a random loopback port) and is ready to
// publish and subscribe. ctx bounds the connection.
func Connect(ctx context.Context, opts ...Option) (*Client, error) {
	o := options{connectTimeout: 10 * time.Second, log: zerolog.Nop()}
	for _, opt := range opts {
		if opt == nil {
			return nil, optErr("Connect", "nil", "an Option")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	node, err := bus.Open(ctx, bus.Config{
		NodeID: o.nodeID, HostID: o.hostID, Prefix: o.prefix,
		NATS: bus.NATSConfig{URLs: o.urls, EmbeddedListen: o.embeddedListen, User: o.user, Password: o.password,
			Token: o.token, NKeySeedFile: o.nkeySeedFile, CredsFile: o.credsFile,
			CAFile: o.caFile, CertFile: o.certFile, KeyFile: o.keyFile, WaitForServer: o.waitForServer},
		Providers:     link.Providers(),
		Provider:      o.provider,
		Authorization: bus.Authorization{Publish: o.allowPub, Subscribe: o.allowSub},
		LeaseTTL:      o.leaseTTL,
		UnheardHold:   o.unheardHold,
		Logger:        &o.log,
	})
	if err != nil {
		return nil, wrap(err)
	}
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID(), TCPListen: o.tcpListen, TCPAdvertise: o.tcpAdvertise, Logger: o.log})
	return &Client{node: node, devs: devs, opts: o, log: o.log,
		pubs: map[*Publisher]struct{}{}, subs: map[*Subscription]struct{}{}, pats: map[*PatternSubscription]struct{}{},
		done: make(chan struct{}), ending: make(chan struct{})}, nil
}

// URL is the NATS URL this client uses: the embedded server's, for other
// processes to pass to WithNATS, or the first one given.
func (c *Client) URL() string {
	if len(c.opts.urls) > 0 {
		return c.opts.urls[0]
	}
	return c.node.ClientURL()
}

// ID is the client's node id on the bus; HostID its host's.
func (c *Client) ID() string { return c.node.ID() }

// HostID is the host id: clients with the same one reach each other
// through shared memory.
func (c *Client) HostID() string { return c.node.HostID() }

// Done is closed when the client is closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// provider is the device rings and homes are allocated on: the forced
// provider, else shm (peers on other hosts get the memory registered on
// tcp too).
func (c *Client) provider() string {
	if c.opts.provider != "" {
		return c.opts.provider
	}
	return rdma.ProviderShm
}

func (c *Client) add(p *Publisher, s *Subscription) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if p != nil {
		c.pubs[p] = struct{}{}
	}
	if s != nil {
		c.subs[s] = struct{}{}
	}
	return nil
}

func (c *Client) remove(p *Publisher, s *Subscription) {
	c.mu.Lock()
	delete(c.pubs, p)
	delete(c.subs, s)
	c.mu.Unlock()
}

// begin registers a publisher or subscription about to be made, so that
// Close does not close the devices under it (one that finds the client
// closed when it is made closes itself, and that uses them too). ctx bounds
// the making by the connect timeout and ends when Close begins; call end
// when the new one is added or closed.
func (c *Client) begin() (ctx context.Context, end func(), err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, ErrClosed
	}
	c.making.Add(1)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.connectTimeout)
	go func() {
		select {
		case <-c.ending:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); c.making.Done() }, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close closes every subscription (each drains its ring and publishes its
// last statistics) and publisher of the client, then the devices and the
// NATS connection (and the embedded server). Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.ending)
		subs, pubs, pats := c.subs, c.pubs, c.pats
		c.subs, c.pubs, c.pats = map[*Subscription]struct{}{}, map[*Publisher]struct{}{}, map[*PatternSubscription]struct{}{}
		c.mu.Unlock()
		c.closeTopicPubs()
		var errs []error
		for s := range subs {
			errs = append(errs, s.close())
		}
		for s := range pats {
			errs = append(errs, s.close())
		}
		for p := range pubs {
			errs = append(errs, p.close())
		}
		c.making.Wait() // no begin after closed is set
		errs = append(errs, c.devs.Close(), c.node.Close())
		close(c.done)
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("tickbus: close: %w", err)
		}
	})
	return c.closeErr
}

// StatsWatch is a subscription to the statistics every subscription of the
// bus publishes each interval (Client.WatchStats).
type StatsWatch = bus.StatsWatch

// WatchStats calls f with every statistics message of topic ("" for every
// topic) on the bus, one at a time: the subject and the message, stats's
// versioned JSON (stats.Decode checks and decodes it; msg is only valid
// during the call). Up to 100,000 messages or 256 MiB wait for f; beyond
// that they are dropped and counted (StatsWatch.Dropped). This is the
// dashboard's feed. Stop ends it; closing the client ends it too.
func (c *Client) WatchStats(topic string, f func(subject string, msg []byte)) (*StatsWatch, error) {
	if f == nil {
		return nil, optErr("WatchStats", "nil", "a function")
	}
	w, err := c.node.WatchStats(topic, f, 100_000, 256<<20)
	return w, wrap(err)
}
