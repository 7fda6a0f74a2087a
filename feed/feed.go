package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrInvalidConfig: a replay option is out of range; the message names
	// it, its value and what was expected.
	ErrInvalidConfig = errors.New("feed: invalid configuration")
)

// Source is a feed adapter: a venue's messages as ticks. Next returns the
// ticks of the next message that has any, in order, the last one flagged
// tick.FlagLastInBatch, valid until the next call; io.EOF at the end. An
// error other than io.EOF ends the feed: it names what was wrong and
// where, and Next returns nothing after it. PubTime is left to the
// publisher.
type Source interface {
	Next() ([]tick.Tick, error)
}

// Position is what a Source reading a file may tell of its progress.
type Position interface {
	Messages() uint64 // messages read so far
	Consumed() int64  // bytes read so far
}

// Publisher is what Replay publishes through: a *tickbus.Publisher (the
// public API) or a *publisher.Publisher.
type Publisher interface {
	PublishBatch(msgs []ring.Tick) (uint64, error)
	PublishAt(seq uint64, typ uint16, payload []byte, publishNs int64) (uint64, error)
}

// Line is one of two redundant lines of a feed, or none.
type Line byte

const (
	NoLine Line = 0
	LineA  Line = 'A'
	LineB  Line = 'B'
)

// ParseLine parses "", "A" or "B".
func ParseLine(s string) (Line, error) {
	switch s {
	case "":
		return NoLine, nil
	case "A", "a":
		return LineA, nil
	case "B", "b":
		return LineB, nil
	}
	return NoLine, fmt.Errorf("%w: line %q, want A or B (or none)", ErrInvalidConfig, s)
}

func (l Line) String() string {
	if l == NoLine {
		return "-"
	}
	return string(rune(l))
}

// Config says how Replay drives a Source.
type Config struct {
	// Speed: 0 replays as fast as flow control allows; 1 at the pace of
	// the ticks' exchange times; N that many times faster.
	Speed float64
	// Line: with LineA or LineB the replay is one of two redundant lines
	// of the same feed. Each tick goes to the topic at a fixed sequence,
	// FirstSeq plus its position in the feed, through PublishAt: the first
	// line there publishes it, the other learns it lost and drops its copy,
	// so subscribers see every tick once while either line delivers it.
	// Both lines must replay the same feed from the same start onto a
	// topic whose next sequence is FirstSeq. Without a line, each
	// message's ticks are one batch at the topic's next sequences.
	Line Line
	// FirstSeq is the topic sequence of a line's first tick (default 1, a
	// fresh topic).
	FirstSeq uint64
	// Progress, if set, is called about every ProgressEvery (default
	// 250ms) and once at the end, on the replaying goroutine.
	Progress      func(Result)
	ProgressEvery time.Duration
	// Idle is what the pacer does close to a tick's due time (default
	// rdma.Yield{}).
	Idle rdma.IdleStrategy
}

// Result is what a replay did.
type Result struct {
	Ticks     uint64        // ticks the source gave
	Published uint64        // ticks this replay put on the topic
	Lost      uint64        // line mode: ticks the other line had already published
	Messages  uint64        // messages read (0 if the Source does not say)
	Bytes     int64         // bytes read (0 if the Source does not say)
	Elapsed   time.Duration // since the replay started
	Done      bool          // the source ended (io.EOF)
}

// Rate is messages (or, for a source that does not count them, ticks) per
// second over the run.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	n := r.Messages
	if n == 0 {
		n = r.Ticks
	}
	return float64(n) / r.Elapsed.Seconds()
}

const maxTicks = 16 // ticks one Source message may carry

// Replay publishes src's ticks through p until src ends (nil error), ctx
// ends (ctx's error), or src or p fails (that error; nothing after the
// failing message is published). A reliable subscriber without room is
// waited for: the replay goes as fast as flow control allows. Each tick's
// PubTime is its intended send time when paced, else the time it was
// encoded.
func Replay(ctx context.Context, p Publisher, src Source, cfg Config) (Result, error) {
	if cfg.Speed < 0 || cfg.Speed != cfg.Speed || cfg.Speed > 1e6 {
		return Result{}, fmt.Errorf("%w: speed %v, want 0 (as fast as possible), 1 (original pace) or N (N times faster, up to 1e6)", ErrInvalidConfig, cfg.Speed)
	}
	if cfg.Line != NoLine && cfg.Line != LineA && cfg.Line != LineB {
		return Result{}, fmt.Errorf("%w: line %q, want A or B", ErrInvalidConfig, byte(cfg.Line))
	}
	if cfg.FirstSeq == 0 {
		cfg.FirstSeq = 1
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 250 * time.Millisecond
	}
	if cfg.Idle == nil {
		cfg.Idle = rdma.Yield{}
	}
	var stop atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-done:
		}
	}()
	pos, _ := src.(Position)
	var (
		res       Result
		start     = time.Now()
		lastProg  = start
		batch     [maxTicks]ring.Tick
		bufs      [maxTicks * tick.Size]byte
		firstExch int64
		paced     bool
	)
	for i := range batch {
		batch[i].Type = tick.MessageType
		batch[i].Payload = bufs[i*tick.Size : (i+1)*tick.Size]
	}
	report := func(end bool) {
		if pos != nil {
			res.Messages, res.Bytes = pos.Messages(), pos.Consumed()
		}
		res.Elapsed = time.Since(start)
		if cfg.Progress != nil && (end || time.Since(lastProg) >= cfg.ProgressEvery) {
			lastProg = time.Now()
			cfg.Progress(res)
		}
	}
	end := func(err error) (Result, error) {
		report(true)
		return res, err
	}
	for n := uint64(0); ; n++ {
		if stop.Load() {
			return end(ctx.Err())
		}
		ts, err := src.Next()
		if err == io.EOF {
			res.Done = true
			return end(nil)
		}
		if err != nil {
			return end(err)
		}
		if len(ts) > maxTicks {
			return end(fmt.Errorf("feed: a message of %d ticks, at most %d", len(ts), maxTicks))
		}
		var now int64
		if cfg.Speed > 0 {
			if !paced {
				paced, firstExch = true, ts[0].ExchTime
			}
			due := start.Add(time.Duration(float64(ts[0].ExchTime-firstExch) / cfg.Speed))
			if !wait(due, cfg.Idle, stop.Load) {
				return end(ctx.Err())
			}
			now = due.UnixNano()
		} else {
			now = time.Now().UnixNano()
		}
		for i := range ts {
			ts[i].PubTime = now
			if _, err := tick.Encode(batch[i].Payload, &ts[i]); err != nil {
				return end(fmt.Errorf("feed: tick %d of the source: %w", res.Ticks+uint64(i)+1, err))
			}
			batch[i].PublishNs = now
		}
		if cfg.Line == NoLine {
			for {
				_, err = p.PublishBatch(batch[:len(ts)])
				if !errors.Is(err, ring.ErrBackPressure) || stop.Load() {
					break
				}
			}
			if err != nil {
				return end(fmt.Errorf("feed: publish after %d ticks: %w", res.Published, err))
			}
			res.Published += uint64(len(ts))
		} else {
			for i := range ts {
				seq := cfg.FirstSeq + res.Ticks + uint64(i)
				for {
					_, err = p.PublishAt(seq, tick.MessageType, batch[i].Payload, now)
					if !errors.Is(err, ring.ErrBackPressure) || stop.Load() {
						break
					}
				}
				switch {
				case err == nil:
					res.Published++
				case errors.Is(err, ring.ErrLost):
					res.Lost++
				default:
					return end(fmt.Errorf("feed: line %s, publish at sequence %d: %w", cfg.Line, seq, err))
				}
			}
		}
		res.Ticks += uint64(len(ts))
		if n&1023 == 0 {
			report(false)
		}
	}
}

// wait waits until due: parked while far, through idle when close. It
// returns false if stop reports true first.
func wait(due time.Time, idle rdma.IdleStrategy, stop func() bool) bool {
	for {
		left := time.Until(due)
		if left <= 0 {
			idle.Reset()
			return true
		}
		if stop() {
			return false
		}
		if left > 2*time.Millisecond {
			time.Sleep(min(left-time.Millisecond, 10*time.Millisecond))
			continue
		}
		idle.Idle(0)
	}
}
