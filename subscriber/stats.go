package subscriber

import (
	"math"
	"time"

	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
)

// Counters are a subscriber's totals, in sequences.
type Counters struct {
	Received  uint64 // delivered ticks (recovered ones included)
	Gaps      uint64 // claimed but never written
	Overruns  uint64 // overwritten before they were read (lossy)
	Skips     uint64 // declared missing by a publisher
	Corrupt   uint64 // slots that failed their check
	Recovered uint64 // delivered from the journal
	Next      uint64 // the next sequence the ring waits for
	// JoinedAt is the first sequence delivered (0: none yet); BeforeJoin
	// the sequences lost while the ring was joining a publisher (see
	// recHandler): published before that publisher wrote into this ring,
	// or landed below the ring's start after it was chosen
	// (ring.ReaderStats.BelowStart).
	JoinedAt   uint64
	BeforeJoin uint64
	// StartedAt is where the ring started when it joined a running topic
	// (the home's counter then); 0 if it started at the topic's beginning.
	StartedAt uint64
	// Join counts sequences reported as ring.EventJoin: published before a
	// publisher that joined later had added this ring.
	Join uint64
	// Epoch counts sequences reported as ring.EventEpoch: reserved by a
	// home that failed over and never written (mostly never handed out).
	Epoch uint64
	// Credits is how many publishers' credit cells the reader writes its
	// position into (reliable mode); JournalEpoch the epoch of the home
	// whose journal is attached (0: none).
	Credits      int
	JournalEpoch uint64
	// Rate is ticks per second over the last stats interval (0 with the
	// stats loop off).
	Rate float64
	// Undelivered is what Close found in the ring past the reader after
	// its drain: ticks written to this ring and never delivered (a newer
	// epoch's, written before its home record arrived). Lost counts them.
	Undelivered uint64
	// Tail is what Close named lost past the last sequence the reader
	// passed: claimed while this ring was subscribed (below the topic's
	// counter, learnt from the home or the record it left) and never
	// written into it, as a publisher that stopped writing to the ring
	// (dropped it, crashed, was fenced) leaves it. The reader names such a
	// tail itself while it runs (counted in Gaps); this is what was left
	// at Close. One ring.EventGap tells the handler. See tail.go.
	Tail uint64
	// TailUnknown is true when Close could learn no bound to name a tail
	// by (no home answered, no ended epoch was known): ticks published
	// after the last one delivered may be missing and cannot be counted.
	// Tail is then 0 because nothing could be named, not because nothing
	// is missing. Close logs a warning too.
	TailUnknown bool
}

// Lost is every sequence passed and not delivered that a publisher wrote
// or claimed: gaps, overruns, skips, corrupt slots, the ticks Close left
// undelivered, and the tail Close named. Join and Epoch are counted
// apart: those sequences were never this ring's to receive.
func (c Counters) Lost() uint64 {
	return c.Gaps + c.Overruns + c.Skips + c.Corrupt + c.Undelivered + c.Tail
}

// Counters returns the totals now; safe from any goroutine.
func (s *Subscriber) Counters() Counters {
	if f := s.final.Load(); f != nil {
		return *f // the ring is unmapped
	}
	jg, jo := s.h.joinGap.Load(), s.h.joinOverrun.Load() // before Stats: never more than it counted
	lg, lo, je := s.h.lateGap.Load(), s.h.lateOverrun.Load(), s.h.joinEpoch.Load()
	st := s.reader.Stats()
	return Counters{Received: st.Delivered, Gaps: st.Gap - jg - lg, Overruns: st.Overrun - jo - lo, Skips: st.Skip,
		Join: lg + lo + s.tailJoin.Load(), Epoch: st.Epoch - je + s.tailEpoch.Load(), Credits: int(s.credits.Load()), JournalEpoch: s.journalAt.Load(),
		Corrupt: st.Corrupt, Recovered: st.Recovered, Next: st.Next,
		JoinedAt: s.h.joinedAt.Load(), BeforeJoin: jg + jo + je + s.h.joinSkipped.Load() + st.BelowStart, StartedAt: s.h.startedAt.Load(),
		Rate: math.Float64frombits(s.rate.Load()), Undelivered: s.undelivered.Load(), Tail: s.tail.Load(),
		TailUnknown: s.tailUnknown.Load()}
}

func (s *Subscriber) statsLoop() {
	defer close(s.statsDone)
	t := time.NewTicker(s.cfg.StatsInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopStats:
			return
		case <-t.C:
			s.publishStats()
		}
	}
}

// publishStats ends the recorder's interval, publishes it and hands it to
// OnStats. A failure to publish (NATS away) is logged once per state change
// in the caller's logger; the counters are totals, so nothing is lost.
func (s *Subscriber) publishStats() {
	c := s.Counters()
	if !s.joinLogged && c.JoinedAt != 0 {
		s.joinLogged = true
		s.log.Info().Uint64("seq", c.JoinedAt).Uint64("earlier", c.BeforeJoin).Msg("subscriber: first tick")
	}
	m, err := s.rep.Next(stats.Counters{Received: c.Received, Gaps: c.Gaps, Overruns: c.Overruns, Tail: c.Tail, TailUnknown: c.TailUnknown})
	if err != nil {
		s.log.Warn().Err(err).Msg("subscriber: stats interval")
		return
	}
	s.rate.Store(math.Float64bits(m.Rate))
	m.Provider, m.CrossHost = s.providersInUse()
	if b, err := stats.Encode(m); err == nil {
		if err := s.node.PublishStats(s.cfg.Topic, s.cfg.ID, b); err != nil {
			s.log.Debug().Err(err).Msg("subscriber: publish stats")
		}
	}
	if s.cfg.OnStats != nil {
		s.cfg.OnStats(m)
	}
}

// latencies holds the receive-minus-publish times of delivered ticks until
// a later Poll records them: the first empty Poll (a feed that is not
// saturated: at once, after the caller has seen the ticks), or a Poll that
// begins with latencyRun or more held (a saturated loop), or Close, after
// its drain. The histogram's work (a bucket increment per tick and two
// atomic adds per record: stats.Recorder.RecordAll) so runs after the
// caller has seen the ticks, not between a tick's arrival and its caller,
// and a loop delivering one tick per Poll pays the two atomic adds once
// per latencyRun ticks, not per tick, while no tick waits behind more than
// latencyRun others' bucket increments (some 60 ns here). The receive
// time is read at delivery, once per batch. Polling goroutine only.
type latencies struct {
	v [latencyBuffer]int64
	n int
}

// latencyBuffer bounds the latencies held: one Poll's batch (WithBatch's
// default and the bench's 256); a poll that delivers more (a larger batch,
// or journal recovery's runs) records what does not fit at once.
const latencyBuffer = 256

// latencyRun is how many held latencies a Poll records before it polls.
const latencyRun = 16

// add holds now minus each tick's publish time; a batch that does not fit
// first records what is held, and one larger than the buffer is recorded
// at once (a buffer at a time).
func (l *latencies) add(rec *stats.Recorder, now int64, ts []ring.Tick) {
	if l.n+len(ts) > len(l.v) {
		l.record(rec)
		if len(ts) > len(l.v) { // recorded at once, a buffer at a time
			for len(ts) > 0 {
				k := min(len(ts), len(l.v))
				for i := range k {
					l.v[i] = now - ts[i].PublishNs
				}
				rec.RecordAll(l.v[:k])
				ts = ts[k:]
			}
			return
		}
	}
	for i := range ts {
		l.v[l.n+i] = now - ts[i].PublishNs
	}
	l.n += len(ts)
}

// record hands what is held to the recorder, in one section of its phaser
// (stats.Recorder.RecordAll): two atomic adds per poll, not per tick.
func (l *latencies) record(rec *stats.Recorder) {
	rec.RecordAll(l.v[:l.n])
	l.n = 0
}
