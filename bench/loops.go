package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/tick"
)

// Errors of the loops.
var (
	// ErrDeadline: a loop hit its deadline before its work was done.
	ErrDeadline = errors.New("bench: deadline passed")
	// ErrUnavailable: the case cannot run here; the message says why.
	ErrUnavailable = errors.New("bench: case unavailable")
)

// endMark as a message's time says "the publisher is done".
const endMark = math.MinInt64

// Message layout (every transport, every size), 64 bytes for the default
// size: u64 seq, then the 56-byte tick (package tick) whose PubTime is the
// intended send time in a latency run, the publisher's start in a
// throughput run, or endMark at the end; then filler up to Config.Size.
const (
	offSeq  = 0
	offTick = 8
)

// msgCodec writes and reads messages; one per loop, it allocates nothing.
type msgCodec struct {
	t tick.Tick
}

// newCodec starts from a valid trade tick.
func newCodec() *msgCodec {
	return &msgCodec{t: tick.Tick{Instrument: 42, Venue: tick.Venue{'X', 'N', 'A', 'S'}, Kind: tick.Trade,
		Price: 101 * tick.PriceScale, Size: 100, ExchTime: 1}}
}

// body encodes the tick of a message into b (tick.Size bytes).
func (c *msgCodec) body(b []byte, seq, ts int64) {
	c.t.PubTime = ts
	c.t.ExchSeq = uint64(seq)
	c.t.Price++
	// The template is valid and b long enough, so this cannot fail.
	_, _ = tick.Encode(b[:tick.Size], &c.t)
}

// encode writes a whole message header and tick into m.
func (c *msgCodec) encode(m []byte, seq, ts int64) {
	binary.LittleEndian.PutUint64(m[offSeq:], uint64(seq))
	c.body(m[offTick:], seq, ts)
}

// decodeBody reads the tick and returns its time.
func (c *msgCodec) decodeBody(b []byte) (int64, error) {
	if err := tick.Decode(b[:tick.Size], &c.t); err != nil {
		return 0, err
	}
	return c.t.PubTime, nil
}

// decode reads a message's sequence and time.
func (c *msgCodec) decode(m []byte) (seq, ts int64, err error) {
	ts, err = c.decodeBody(m[offTick:])
	return int64(binary.LittleEndian.Uint64(m[offSeq:])), ts, err
}

// txPort sends messages of one topic. Sends spin (through the idle
// strategy) while the transport is back-pressured, until the deadline
// (nanotime) passes.
type txPort interface {
	// send one message.
	send(seq, ts, deadline int64) error
	// sendBatch sends n messages with sequences seq0.. in one operation of
	// the transport where it has one.
	sendBatch(seq0 int64, n int, ts, deadline int64) error
	close() error
}

// rxPort receives messages of one topic, one at a time, polling (through
// the idle strategy) until one arrives or the deadline passes.
type rxPort interface {
	next(deadline int64) (seq, ts int64, err error)
	close() error
}

// histMax is the largest latency a histogram records, 10 s.
const histMax = 10_000_000_000

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMax, 3) }

// record adds v, clamped into the histogram's range (a latency of 0 ns on
// a coarse clock counts as 1 ns, one past 10 s as 10 s: the max still
// shows it is off the scale).
func record(h *hdrhistogram.Histogram, v int64) {
	if v < 1 {
		v = 1
	}
	if v > histMax {
		v = histMax
	}
	_ = h.RecordValue(v) // in range by construction
}

// rxStats is what a subscriber loop saw.
type rxStats struct {
	count   int64 // messages delivered (not the end mark)
	lost    int64 // sequences skipped
	startNs int64 // earliest publisher start seen (throughput runs)
	lastNs  int64 // time of the last delivery
	hist    *hdrhistogram.Histogram
}

// subLoop receives until it has seen the end mark of each of pubs
// publishers, or the deadline. With latency set it records now minus the
// message's intended time. With echo set (ping-pong), it sends every
// message back on echo unchanged. A sequence it never saw is counted lost.
func subLoop(rx rxPort, echo txPort, latency bool, pubs int, deadline int64) (rxStats, error) {
	return subLoopSlow(rx, echo, latency, pubs, deadline, nil)
}

// subLoopSlow is subLoop that also notes, with slow set, every tick of a
// latency run slower than slowOver (slowLog).
func subLoopSlow(rx rxPort, echo txPort, latency bool, pubs int, deadline int64, slow *slowLog) (rxStats, error) {
	st := rxStats{hist: newHist(), startNs: math.MaxInt64}
	expect := int64(-1)
	for ends := 0; ends < pubs; {
		seq, ts, err := rx.next(deadline)
		if err != nil {
			return st, err
		}
		if echo != nil {
			if err := echo.send(seq, ts, deadline); err != nil {
				return st, err
			}
		}
		if expect >= 0 && seq > expect {
			st.lost += seq - expect
		}
		if seq >= expect {
			expect = seq + 1
		}
		if ts == endMark {
			ends++
			if !latency {
				st.lastNs = nanotime() // the last delivery is just before
			}
			continue
		}
		st.count++
		if latency {
			now := nanotime()
			st.lastNs = now
			record(st.hist, now-ts)
			if slow != nil && now-ts > slowOver {
				slow.note(ts, now-ts)
			}
			continue
		}
		// Throughput: read the clock every 64 ticks, not per tick.
		if st.count&63 == 1 {
			st.lastNs = nanotime()
		}
		if ts < st.startNs {
			st.startNs = ts
		}
	}
	return st, nil
}

// slowLog holds the intended time and latency of each tick slower than
// slowOver, up to slowMax of them, in memory allocated before the run: when
// the slow ticks of a latency run happen tells what they waited for (a
// period points at a timer: the bus's heartbeats, doc.go). A child writes
// it beside its profile (Config.Profile), as CSV.
type slowLog struct{ at, lat []int64 }

const (
	slowOver = int64(30 * time.Microsecond)
	slowMax  = 1 << 17
)

func newSlowLog() *slowLog {
	return &slowLog{at: make([]int64, 0, slowMax), lat: make([]int64, 0, slowMax)}
}

func (s *slowLog) note(at, lat int64) {
	if len(s.at) < cap(s.at) {
		s.at, s.lat = append(s.at, at), append(s.lat, lat)
	}
}

// slowPath is the slow-tick file beside a child's profile ("" for none).
func slowPath(profile string) string {
	if profile == "" {
		return ""
	}
	return strings.TrimSuffix(profile, ".pprof") + ".slow.csv"
}

// write puts the log into path: a header, then one "intended_ns,latency_ns"
// line per slow tick, times CLOCK_MONOTONIC.
func (s *slowLog) write(path string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: slow ticks: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# ticks slower than %d ns (at most %d), intended send time (CLOCK_MONOTONIC ns) and latency (ns)\nintended_ns,latency_ns\n", slowOver, slowMax)
	for i := range s.at {
		fmt.Fprintf(w, "%d,%d\n", s.at[i], s.lat[i])
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("bench: slow ticks: %w", err)
	}
	return nil
}

// txStats is what a publisher loop did.
type txStats struct {
	sent    int64
	unsent  int64 // paced ticks not sent by the schedule's stop
	startNs int64
	// hist holds round trips (ping-pong) and, in every paced run, a lower
	// bound for each tick the publisher never sent: stop minus its
	// intended time. A publisher that falls behind shows in the figures.
	hist *hdrhistogram.Histogram
}

// schedule is a paced run: one tick every period from start until end. A
// publisher that falls behind stops sending at stop; every loop gives up
// at deadline.
type schedule struct {
	start, period, end, stop, deadline int64
}

func newSchedule(start int64, rate int, d time.Duration) schedule {
	s := schedule{start: start, period: int64(time.Second) / int64(rate), end: start + int64(d)}
	s.stop = s.end + int64(max(d, time.Second))
	s.deadline = s.stop + int64(grace)
	return s
}

// pacedLoop sends one message every period from start until end, each
// stamped with its intended send time, then the end mark. If the publisher
// falls behind it sends at once, still stamped with the intended time, so
// the stall shows in the subscriber's latency; ticks still unsent at stop
// are recorded (stop minus intended time, a lower bound) and counted. With
// echo set it waits for each message to come back and records the round
// trip from the intended time.
func pacedLoop(tx txPort, echo rxPort, idle rdma.IdleStrategy, s schedule) (txStats, error) {
	st := txStats{startNs: s.start, hist: newHist()}
	for i := int64(0); ; i++ {
		intended := s.start + i*s.period
		if intended >= s.end {
			break
		}
		now := nanotime()
		if now > s.stop {
			for ; intended < s.end; intended += s.period {
				record(st.hist, s.stop-intended)
				st.unsent++
			}
			break
		}
		for now < intended {
			idle.Idle(0)
			now = nanotime()
		}
		idle.Reset() // due: a time-based strategy spins again for the next wait
		if err := tx.send(i, intended, s.deadline); err != nil {
			return st, err
		}
		st.sent++
		if echo != nil {
			for {
				// Intended times are unique: they name the tick whatever
				// sequence the way back gave it.
				_, ts, err := echo.next(s.deadline)
				if err != nil {
					return st, err
				}
				if ts == intended {
					record(st.hist, nanotime()-intended)
					break
				}
			}
		}
	}
	if err := tx.send(st.sent, endMark, s.deadline); err != nil {
		return st, err
	}
	if echo != nil {
		for {
			_, ts, err := echo.next(s.deadline)
			if err != nil {
				return st, err
			}
			if ts == endMark {
				break
			}
		}
	}
	return st, nil
}

// floodLoop sends as fast as the transport accepts until end, batch
// messages per send, each stamped with the start time, then the end mark.
func floodLoop(tx txPort, batch int, start, end, deadline int64) (txStats, error) {
	st := txStats{startNs: start}
	var seq int64
	for {
		// Read the clock every 64 sends (or every batch) only.
		for k := 0; k < 64; k++ {
			var err error
			if batch > 1 {
				err = tx.sendBatch(seq, batch, start, deadline)
			} else {
				err = tx.send(seq, start, deadline)
			}
			if err != nil {
				return st, err
			}
			seq += int64(batch)
			if batch > 1 {
				break
			}
		}
		if nanotime() >= end {
			break
		}
	}
	st.sent = seq
	return st, tx.send(seq, endMark, deadline)
}
