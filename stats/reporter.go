package stats

import (
	"fmt"
	"time"
)

// Meta names what a Reporter reports on.
type Meta struct {
	Topic      string
	Subscriber string
	Host       string
	Provider   string
	CrossHost  bool
}

// Counters are a subscription's totals since it began.
type Counters struct {
	Received uint64
	Gaps     uint64
	Overruns uint64
	Tail     uint64 // named lost at Close (Message.Tail)
	// TailUnknown: Close could name no tail (Message.TailUnknown).
	TailUnknown bool
}

// PublishFunc sends data on a subject (for example (*nats.Conn).Publish).
type PublishFunc func(subject string, data []byte) error

// Reporter turns a Recorder's intervals and a subscription's counters into
// Messages. One goroutine (the stats loop) uses a Reporter; it is off the hot
// path and may allocate.
type Reporter struct {
	meta Meta
	rec  *Recorder
	iv   Interval
	enc  countsEncoder
	prev uint64
}

// NewReporter returns a reporter for rec, whose counters start at zero.
func NewReporter(meta Meta, rec *Recorder) *Reporter {
	return &Reporter{meta: meta, rec: rec}
}

// Next ends the recorder's interval and returns its message. Received is a
// total; the rate is its increase over the interval.
func (p *Reporter) Next(totals Counters) (*Message, error) {
	hist, err := p.rec.snapshotEncoded(&p.iv, &p.enc)
	if err != nil {
		return nil, err
	}
	m := &Message{
		Version:     Version,
		Topic:       p.meta.Topic,
		Subscriber:  p.meta.Subscriber,
		Host:        p.meta.Host,
		Provider:    p.meta.Provider,
		CrossHost:   p.meta.CrossHost,
		Start:       p.iv.Start.UTC(),
		End:         p.iv.End.UTC(),
		Received:    totals.Received,
		Gaps:        totals.Gaps,
		Overruns:    totals.Overruns,
		Tail:        totals.Tail,
		TailUnknown: totals.TailUnknown,
		Negative:    p.iv.Negative,
		Saturated:   p.iv.Saturated,
	}
	if d := m.End.Sub(m.Start).Seconds(); d > 0 && totals.Received >= p.prev {
		m.Rate = float64(totals.Received-p.prev) / d
	}
	p.prev = totals.Received
	// Encoded from the recorder's counts (countsEncoder); LatencyHistogram
	// decodes it when asked.
	m.Hist, m.ours = hist, hist
	return m, nil
}

// Publish ends the interval and sends its encoded message on
// Subject(prefix, topic, subscriber).
func (p *Reporter) Publish(prefix string, totals Counters, publish PublishFunc) error {
	m, err := p.Next(totals)
	if err != nil {
		return err
	}
	b, err := Encode(m)
	if err != nil {
		return err
	}
	if err := publish(Subject(prefix, m.Topic, m.Subscriber), b); err != nil {
		return fmt.Errorf("stats: publish %s/%s: %w", m.Topic, m.Subscriber, err)
	}
	return nil
}

// Interval length a subscriber reports at unless configured otherwise.
const DefaultInterval = time.Second
