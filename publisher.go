package tickbus

import (
	"context"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Publisher puts messages on one topic: every message gets the topic's
// next sequence number (one global order over all the topic's publishers)
// and is written straight into every subscriber's ring. One goroutine
// publishes; the other methods are safe from any.
type Publisher struct {
	c   *Client
	p   *publisher.Publisher
	buf [tick.Size]byte // PublishTick's encoding, on the publishing goroutine
}

// Publisher starts publishing on topic: it finds the topic's home (the
// holder of its sequence counter) or becomes it, and from then on connects
// to every subscriber of the topic, present and future.
func (c *Client) Publisher(topic string, opts ...PubOption) (*Publisher, error) {
	var o pubOptions
	for _, opt := range opts {
		if opt == nil {
			return nil, optErr("Publisher", "nil", "a PubOption")
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
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
	pub := &Publisher{c: c, p: p}
	if err := c.add(pub, nil); err != nil {
		_ = p.Close()
		return nil, err
	}
	return pub, nil
}

// Publish puts one message of type typ on the topic, stamped with the time
// now, and returns its sequence. It allocates nothing and takes no lock;
// its errors are this package's sentinels, unwrapped (ErrTooLarge,
// ErrBackPressure, ErrTimeout, ErrHomeFailed, ErrClosed).
func (p *Publisher) Publish(typ uint16, payload []byte) (uint64, error) {
	seq, err := p.p.Publish(typ, payload, time.Now().UnixNano())
	return seq, pubErr(err)
}

// PublishStamped is Publish with the time latency is measured from given:
// a paced feed's intended send time, so that a stalled publisher shows in
// the subscribers' latency (no coordinated omission).
func (p *Publisher) PublishStamped(typ uint16, payload []byte, publishNs int64) (uint64, error) {
	seq, err := p.p.Publish(typ, payload, publishNs)
	return seq, pubErr(err)
}

// PublishTick encodes t and publishes it as a TickType message. A zero
// t.PubTime is stamped with the time now (t is changed); any other is kept
// (an intended send time). ErrInvalidTick: t was refused, nothing
// published.
func (p *Publisher) PublishTick(t *Tick) (uint64, error) {
	if t.PubTime == 0 {
		t.PubTime = time.Now().UnixNano()
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
		t.PubTime = time.Now().UnixNano()
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
	seq, err := p.p.PublishBatch(msgs)
	return seq, pubErr(err)
}

// PublishAt publishes at exactly sequence seq (typically the exchange's
// own): with two redundant feed lines publishing the same sequences, the
// first wins and the other gets ErrLost (drop the copy).
func (p *Publisher) PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error) {
	got, err := p.p.PublishAt(seq, typ, payload, publishNs)
	return got, pubErr(err)
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

// Close waits (up to the publish timeout) for every posted write to land,
// leaves the topic and closes the publisher's links. Do not call it while
// a publish runs. Idempotent.
func (p *Publisher) Close() error {
	err := p.close() // before remove: the client's Close waits for it then, and closes the devices after
	p.c.remove(p, nil)
	return err
}

func (p *Publisher) close() error { return wrap(p.p.Close()) }
