package publisher

import (
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Publish claims the next sequence and writes one message of type typ
// into every subscriber's ring. publishNs is the time latency is measured
// from (time.Now().UnixNano(), or a paced feed's intended send time). It
// returns the sequence. It allocates nothing, takes no lock, makes no
// syscall on shm. Errors are ring's sentinels (ErrTooLarge for an
// oversize payload; ring.ErrClosed once Close has begun). One goroutine
// publishes at a time; Close may come from any (see gate).
func (p *Publisher) Publish(typ uint16, payload []byte, publishNs int64) (uint64, error) {
	if !p.gate.Enter() { // Close has begun: nothing of the writer may be touched
		return 0, ring.ErrClosed
	}
	seq, err := p.w.Publish(typ, payload, publishNs)
	if err != nil && p.failover(err) {
		seq, err = p.w.Publish(typ, payload, publishNs)
	}
	p.gate.Leave()
	if err != nil {
		return seq, p.publishErr(err)
	}
	return seq, nil
}

// PublishTick encodes t (its PubTime is the publish time) and publishes it.
func (p *Publisher) PublishTick(t *tick.Tick) (uint64, error) {
	if _, err := tick.Encode(p.buf[:], t); err != nil {
		return 0, err
	}
	return p.Publish(tick.MessageType, p.buf[:], t.PubTime)
}

// PublishBatch claims len(msgs) consecutive sequences at once and writes
// them in order (Seq and Publisher of each are ignored); it returns the
// first sequence.
func (p *Publisher) PublishBatch(msgs []ring.Tick) (uint64, error) {
	if !p.gate.Enter() { // Close has begun: nothing of the writer may be touched
		return 0, ring.ErrClosed
	}
	seq, err := p.w.PublishBatch(msgs)
	if err != nil && p.failover(err) {
		seq, err = p.w.PublishBatch(msgs)
	}
	p.gate.Leave()
	if err != nil {
		return seq, p.publishErr(err)
	}
	return seq, nil
}

// PublishAt publishes at exactly sequence seq: with two redundant feed
// lines publishing the same sequences, the first wins and the other gets
// ring.ErrLost (drop the copy).
func (p *Publisher) PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error) {
	if !p.gate.Enter() { // Close has begun: nothing of the writer may be touched
		return 0, ring.ErrClosed
	}
	got, err := p.w.PublishAt(seq, typ, payload, publishNs)
	if err != nil && p.failover(err) {
		got, err = p.w.PublishAt(seq, typ, payload, publishNs)
	}
	p.gate.Leave()
	if err != nil {
		return got, p.publishErr(err)
	}
	return got, nil
}
