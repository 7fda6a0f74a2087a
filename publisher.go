package tickbus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Publisher puts messages on one topic: every message gets the topic's
// next sequence number (one global order over all the topic's publishers)
// and is written straight into every subscriber's ring. One goroutine
// publishes; the other methods are safe from any.
type Publisher struct {
	c     *Client
	p     *publisher.Publisher
	buf   [tick.Size]byte   // PublishTick's encoding, on the publishing goroutine
	pacer *publisher.Pacer  // WithRate's schedule; nil: unpaced
	idle  rdma.IdleStrategy // what a paced call does while it waits
}

// Publisher starts publishing on topic: it finds the topic's home (the
// holder of its sequence counter) or becomes it, and from then on connects
// to every subscriber of the topic, present and future.
func (c *Client) Publisher(topic string, opts ...PubOption) (*Publisher, error) {
	var o pubOptions
	if err := applyPubOptions("Connect", &o, c.opts.pubDefaults); err != nil {
		return nil, err
	}
	if err := applyPubOptions("Publisher", &o, opts); err != nil {
		return nil, err
	}
	ctx, end, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	claim := ring.ClaimCAS
	if o.faa {
		claim = ring.ClaimFAA
	}
	p, err := publisher.New(ctx, c.node, c.devs, publisher.Config{Topic: topic, ID: o.id, PublisherID: o.publisherID,
		Provider: c.provider(), SlotSize: o.slotSize, JournalSlots: o.journalSlots, Claim: claim, MaxBatch: o.maxBatch,
		Timeout: o.timeout, Idle: o.idle, ConnectTimeout: c.opts.connectTimeout, Logger: c.log})
	if err != nil {
		if c.isClosed() {
			return nil, ErrClosed
		}
		return nil, wrap(err)
	}
	pub := &Publisher{c: c, p: p, idle: o.idle}
	if pub.idle == nil {
		pub.idle = rdma.Yield{}
	}
	if o.rate > 0 {
		if pub.pacer, err = publisher.NewPacer(o.rate); err != nil {
			_ = p.Close()
			return nil, wrap(err)
		}
	}
	if err := c.add(pub, nil); err != nil {
		_ = p.Close()
		return nil, err
	}
	return pub, nil
}

// Publish puts one message of type typ on the topic, stamped with the time
// now, and returns its sequence. It allocates nothing and takes no lock;
// its errors are this package's sentinels, unwrapped (ErrTooLarge,
// ErrBackPressure, ErrNoHome (retryable: also a home that did not answer
// the claim in time), ErrClosed).
func (p *Publisher) Publish(typ uint16, payload []byte) (uint64, error) {
	seq, err := p.p.Publish(typ, payload, p.now())
	return seq, pubErr(err)
}

// PublishStamped is Publish with the time latency is measured from given:
// a paced feed's intended send time, so that a stalled publisher shows in
// the subscribers' latency (no coordinated omission).
func (p *Publisher) PublishStamped(typ uint16, payload []byte, publishNs int64) (uint64, error) {
	p.pace()
	seq, err := p.p.Publish(typ, payload, publishNs)
	return seq, pubErr(err)
}

// PublishTick encodes t and publishes it as a TickType message. A zero
// t.PubTime is stamped with the time now (t is changed); any other is kept
// (an intended send time). ErrInvalidTick: t was refused, nothing
// published.
func (p *Publisher) PublishTick(t *Tick) (uint64, error) {
	if t.PubTime == 0 {
		t.PubTime = p.now()
	} else {
		p.pace()
	}
	if _, err := tick.Encode(p.buf[:], t); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidTick, err)
	}
	seq, err := p.p.Publish(TickType, p.buf[:], t.PubTime)
	return seq, pubErr(err)
}

// PublishTickAt is PublishTick at exactly sequence seq (see PublishAt):
// redundant feed lines publish each exchange sequence once, the first
// line wins and the other gets ErrLost.
func (p *Publisher) PublishTickAt(seq uint64, t *Tick) (uint64, error) {
	if t.PubTime == 0 {
		t.PubTime = p.now()
	} else {
		p.pace()
	}
	if _, err := tick.Encode(p.buf[:], t); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalidTick, err)
	}
	got, err := p.p.PublishAt(seq, TickType, p.buf[:], t.PubTime)
	return got, pubErr(err)
}

// PublishBatch claims len(msgs) consecutive sequences in one round trip
// and writes the messages in order; each one's Type, Flags, PublishNs and
// Payload are used (Seq and Publisher are ignored). It returns the first
// sequence.
func (p *Publisher) PublishBatch(msgs []Message) (uint64, error) {
	p.pace()
	seq, err := p.p.PublishBatch(msgs)
	return seq, pubErr(err)
}

// PublishAt publishes at exactly sequence seq (typically the exchange's
// own): with two redundant feed lines publishing the same sequences, the
// first wins and the other gets ErrLost (drop the copy).
func (p *Publisher) PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error) {
	p.pace()
	got, err := p.p.PublishAt(seq, typ, payload, publishNs)
	return got, pubErr(err)
}

// now is a publish's time: its turn's intended time when paced
// (WithRate), after waiting for it; else the time now.
func (p *Publisher) now() int64 {
	if p.pacer == nil {
		return time.Now().UnixNano()
	}
	ns, _ := p.pacer.Wait(p.idle, nil)
	return ns
}

// pace waits for a paced publish's turn (WithRate).
func (p *Publisher) pace() {
	if p.pacer != nil {
		_, _ = p.pacer.Wait(p.idle, nil)
	}
}

// Subscribers is how many subscriber rings the publisher writes into now.
func (p *Publisher) Subscribers() int { return p.p.Subscribers() }

// WaitSubscribers waits until at least n subscribers are connected, or ctx
// ends.
func (p *Publisher) WaitSubscribers(ctx context.Context, n int) error {
	return wrap(p.p.WaitSubscribers(ctx, n))
}

// IsHome reports whether this publisher holds the topic's sequence counter.
func (p *Publisher) IsHome() bool { return p.p.IsHome() }

// MaxPayload is the largest message the topic's slots carry.
func (p *Publisher) MaxPayload() int { return p.p.MaxPayload() }

// Stats are the publisher's counters (published, batches, waits, dropped
// subscribers).
func (p *Publisher) Stats() PublisherStats { return p.p.Stats() }

// Close refuses every later publish (ErrClosed), waits for one under way on
// another goroutine to return, waits (up to the publish timeout) for every
// posted write to land, leaves the topic and closes the publisher's links.
// Safe from any goroutine, while another publishes. Idempotent.
func (p *Publisher) Close() error {
	err := p.close() // before remove: the client's Close waits for it then, and closes the devices after
	p.c.remove(p, nil)
	return err
}

func (p *Publisher) close() error { return wrap(p.p.Close()) }

// topicPub is Client.Publish's publisher of one topic, made at its first
// publish; mu lets publishes from several goroutines take turns.
type topicPub struct {
	mu     sync.Mutex
	p      *Publisher
	closed bool // set by Client.Close, under mu, before the publisher closes
}

// Publish puts t on topic through the client's own publisher of that
// topic, the way nats.go's Conn.Publish needs no publisher of one's own:
// the first Publish of a topic makes it (as Client.Publisher(topic) would,
// with WithPublisherDefaults), later ones reuse it, and Close closes it.
// A zero t.PubTime is stamped (t is changed). Safe from any goroutine:
// publishes of one topic take turns through a lock, uncontended on one
// goroutine; a Publisher of your own has none. It allocates nothing after
// the first call of a topic. Errors are PublishTick's, or Client.Publisher's
// when the publisher could not be made (nothing is kept: the next Publish
// tries again). ErrNoHome is retryable.
func (c *Client) Publish(topic string, t *Tick) error {
	tp := c.topicPub(topic)
	if tp == nil {
		return ErrClosed
	}
	tp.mu.Lock()
	if tp.closed {
		tp.mu.Unlock()
		return ErrClosed
	}
	if tp.p == nil {
		p, err := c.Publisher(topic)
		if err != nil {
			tp.mu.Unlock()
			return err
		}
		tp.p = p
	}
	_, err := tp.p.PublishTick(t)
	tp.mu.Unlock()
	return err
}

// topicPub finds topic's entry, lock-free (a map copied on write), or
// adds it; nil once the client is closed.
func (c *Client) topicPub(topic string) *topicPub {
	if m := c.topicPubs.Load(); m != nil {
		if tp := (*m)[topic]; tp != nil {
			return tp
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	old := c.topicPubs.Load()
	if old != nil && (*old)[topic] != nil {
		return (*old)[topic]
	}
	m := make(map[string]*topicPub, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	tp := &topicPub{}
	m[topic] = tp
	c.topicPubs.Store(&m)
	return tp
}

// closeTopicPubs waits for Client.Publish calls in flight and stops later
// ones, before Close closes their publishers (a publisher is never closed
// under a publish).
func (c *Client) closeTopicPubs() {
	m := c.topicPubs.Load()
	if m == nil {
		return
	}
	for _, tp := range *m {
		tp.mu.Lock()
		tp.closed = true
		tp.mu.Unlock()
	}
}
