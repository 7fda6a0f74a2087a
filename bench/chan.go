package bench

import (
	"context"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// The chan case: a Go buffered channel between two goroutines of this
// process, the baseline every Go programmer has. A channel element is a
// frame (an offset into a pool of message bytes and a count), so the same
// bytes move as in the other cases: the publisher writes Size bytes per
// tick into the pool, the subscriber copies them out. Both sides poll the
// channel without blocking, through the same idle strategy as every other
// case.

type frame struct {
	off, n int
}

// chanPipe is one topic.
type chanPipe struct {
	ch     chan frame
	pool   []byte
	frames int // frames in the pool: channel capacity + 2, so a frame is never reused while the subscriber may read it
	fsize  int // bytes per frame
	size   int
}

// newChanPipe holds up to slots messages in flight (at least 4 frames).
func newChanPipe(size, batch, slots int) *chanPipe {
	capacity := max(4, slots/batch)
	frames := capacity + 2
	return &chanPipe{ch: make(chan frame, capacity), pool: make([]byte, frames*batch*size), frames: frames, fsize: batch * size, size: size}
}

type chanTx struct {
	p      *chanPipe
	w      int
	filler []byte
	codec  *msgCodec
	idle   rdma.IdleStrategy
}

func (t *chanTx) push(f frame, deadline int64) error {
	for spins := 0; ; spins++ {
		select {
		case t.p.ch <- f:
			t.w++
			t.idle.Reset() // sent: a time-based strategy spins again
			return nil
		default:
		}
		t.idle.Idle(0)
		if spins&255 == 255 && nanotime() > deadline {
			return ErrDeadline
		}
	}
}

func (t *chanTx) send(seq, ts, deadline int64) error {
	off := (t.w % t.p.frames) * t.p.fsize
	m := t.p.pool[off : off+t.p.size]
	t.codec.encode(m, seq, ts)
	copy(m[MinSize:], t.filler)
	return t.push(frame{off: off, n: 1}, deadline)
}

func (t *chanTx) sendBatch(seq0 int64, n int, ts, deadline int64) error {
	off := (t.w % t.p.frames) * t.p.fsize
	for i := range n {
		m := t.p.pool[off+i*t.p.size : off+(i+1)*t.p.size]
		t.codec.encode(m, seq0+int64(i), ts)
		copy(m[MinSize:], t.filler)
	}
	return t.push(frame{off: off, n: n}, deadline)
}

func (t *chanTx) close() error { return nil }

type chanRx struct {
	p       *chanPipe
	cur     frame
	scratch []byte
	codec   *msgCodec
	idle    rdma.IdleStrategy
}

func (r *chanRx) next(deadline int64) (int64, int64, error) {
	for spins := 0; r.cur.n == 0; spins++ {
		select {
		case r.cur = <-r.p.ch:
			r.idle.Reset() // received: a time-based strategy spins again
		default:
			r.idle.Idle(0)
			if spins&255 == 255 && nanotime() > deadline {
				return 0, 0, ErrDeadline
			}
		}
	}
	copy(r.scratch, r.p.pool[r.cur.off:r.cur.off+r.p.size])
	r.cur.off += r.p.size
	r.cur.n--
	return r.codec.decode(r.scratch)
}

func (r *chanRx) close() error { return nil }

type chanCase struct{}

func (*chanCase) setup(context.Context, Config) error { return nil }
func (*chanCase) close() error                        { return nil }

func (c *chanCase) latency(ctx context.Context, cfg Config) (phase, error) {
	mode := modeLatency
	if cfg.PingPong {
		mode = modePingPong
	}
	return c.run(ctx, cfg, mode, 1, cfg.Duration)
}

func (c *chanCase) throughput(ctx context.Context, cfg Config, batch int) (phase, error) {
	return c.run(ctx, cfg, modeThroughput, batch, cfg.ThroughputDuration)
}

// run drives the publisher and subscriber loops in two goroutines, each
// pinned to its own CPU if configured.
func (c *chanCase) run(_ context.Context, cfg Config, mode string, batch int, d time.Duration) (phase, error) {
	a, b := newChanPipe(cfg.Size, batch, cfg.RingSlots), newChanPipe(cfg.Size, 1, cfg.RingSlots)
	newIdle := func() rdma.IdleStrategy { s, _ := rdma.ParseIdle(cfg.Idle); return s }
	tx := &chanTx{p: a, filler: make([]byte, cfg.Size-MinSize), codec: newCodec(), idle: newIdle()}
	rx := &chanRx{p: a, scratch: make([]byte, cfg.Size), codec: newCodec(), idle: newIdle()}
	var echoTx txPort
	var echoRx rxPort
	if mode == modePingPong {
		echoTx = &chanTx{p: b, filler: make([]byte, cfg.Size-MinSize), codec: newCodec(), idle: newIdle()}
		echoRx = &chanRx{p: b, scratch: make([]byte, cfg.Size), codec: newCodec(), idle: newIdle()}
	}
	cpu0 := selfCPU()
	type subOut struct {
		st  rxStats
		err error
	}
	subDone := make(chan subOut, 1)
	pubDone := make(chan subOut, 1)
	sched := newSchedule(nanotime()+int64(5*time.Millisecond), cfg.Rate, d)
	start, end, deadline := sched.start, sched.end, sched.deadline
	go func() {
		if err := pinFromConfig(cfg, 1); err != nil {
			subDone <- subOut{err: err}
			return
		}
		st, err := subLoop(rx, echoTx, mode == modeLatency, 1, deadline)
		subDone <- subOut{st: st, err: err}
	}()
	var pst txStats
	go func() {
		if err := pinFromConfig(cfg, 0); err != nil {
			pubDone <- subOut{err: err}
			return
		}
		var err error
		if mode == modeThroughput {
			pst, err = floodLoop(tx, batch, start, end, deadline)
		} else {
			pst, err = pacedLoop(tx, echoRx, newIdle(), sched)
		}
		pubDone <- subOut{err: err}
	}()
	po, so := <-pubDone, <-subDone
	ph := phase{cpu: selfCPU() - cpu0, cores: 2, sent: pst.sent, unsent: pst.unsent, delivered: so.st.count, lost: so.st.lost}
	if po.err != nil {
		return ph, po.err
	}
	if so.err != nil {
		return ph, so.err
	}
	switch mode {
	case modeLatency:
		ph.hist = mergeHist(so.st.hist, pst.hist)
	case modePingPong:
		ph.hist = pst.hist
	default:
		if so.st.count > 0 && so.st.lastNs > start {
			ph.throughput = float64(so.st.count) / (float64(so.st.lastNs-start) / 1e9)
		}
	}
	return ph, nil
}
