package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/rdma/tcp"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// The tickbus cases drive the data path itself: ring writers in publisher
// processes, rings and readers in subscriber processes, the topic's home
// (sequence counter) in this process, all connected through queue pairs of
// one provider (shm or tcp on loopback). NATS is not involved: the
// descriptors and endpoints travel on the children's stdin and stdout (see
// tbwire.go). That measures exactly what a tick costs on the data path.

const (
	roleTB   = "bench-tickbus"
	sidePub  = "pub"
	sideSub  = "sub"
	tbHostID = "tickbus-bench"
)

func init() {
	child.Register(roleTB, tbMain)
}

func tbProvider(transport string) string {
	if transport == CaseTickbusTCP {
		return rdma.ProviderTCP
	}
	return rdma.ProviderShm
}

func openDevice(provider string) (rdma.Device, error) {
	switch provider {
	case rdma.ProviderTCP:
		return tcp.Open(tcp.Config{HostID: tbHostID, Listen: "127.0.0.1:0"})
	default:
		return shm.Open(shm.Config{HostID: tbHostID})
	}
}

// tbSlotSize is the ring and journal slot for a message of size bytes.
func tbSlotSize(size int) int { return (ring.SlotHeaderSize + size + 63) &^ 63 }

// tbTopics says which topics a child writes and reads, and its index among
// the topic's writers or readers. Topic 0 runs publishers → subscribers;
// topic 1 (ping-pong: one of each) runs subscriber 0 → publisher 0.
func tbTopics(side string, pp bool) (writes, reads []int) {
	if side == sidePub {
		writes = []int{0}
		if pp {
			reads = []int{1}
		}
		return writes, reads
	}
	reads = []int{0}
	if pp {
		writes = []int{1}
	}
	return writes, reads
}

// tbCounts is how many writers and readers topic t has.
func tbCounts(t, pubs, subs int) (writers, readers int) {
	if t == 0 {
		return pubs, subs
	}
	return 1, 1
}

func qpDepth(dev rdma.Device) int {
	d := 512
	if m := dev.Caps().MaxQPDepth; m > 0 && m < d {
		d = m
	}
	return d
}

func newQP(dev rdma.Device, cq rdma.CompletionQueue) (rdma.QueuePair, error) {
	return dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: qpDepth(dev)})
}

func connect(ctx context.Context, qp rdma.QueuePair, epBytes []byte) error {
	var ep rdma.Endpoint
	if err := ep.UnmarshalBinary(epBytes); err != nil {
		return err
	}
	return qp.Connect(ctx, ep)
}

// tbNode is one child's share of the topology.
type tbNode struct {
	a      roleArgs
	side   string
	dev    rdma.Device
	closes []func() error

	writers map[int]*tbWriterSide
	readers map[int]*tbReaderSide
}

type tbWriterSide struct {
	dropErr error // the first reader the writer dropped, and why
	cq      rdma.CompletionQueue
	homeQP  rdma.QueuePair
	qps     []rdma.QueuePair // per reader
	w       *ring.Writer
}

type tbReaderSide struct {
	cq  rdma.CompletionQueue
	r   *ring.Ring
	qps []rdma.QueuePair // per writer
}

func (n *tbNode) close() error {
	var errs []error
	for i := len(n.closes) - 1; i >= 0; i-- {
		errs = append(errs, n.closes[i]())
	}
	n.closes = nil
	return errors.Join(errs...)
}

func (n *tbNode) cq() (rdma.CompletionQueue, error) {
	cq, err := n.dev.CreateCQ(4096)
	if err == nil {
		n.closes = append(n.closes, cq.Close)
	}
	return cq, err
}

func (n *tbNode) qp(cq rdma.CompletionQueue) (rdma.QueuePair, error) {
	qp, err := newQP(n.dev, cq)
	if err == nil {
		n.closes = append(n.closes, qp.Close)
	}
	return qp, err
}

// make is step A: the rings, writers' QPs and what the parent must know.
func (n *tbNode) make(pp bool) (tbMade, error) {
	var made tbMade
	writes, reads := tbTopics(n.side, pp)
	mode, _ := ring.ParseMode(n.a.ringMode)
	for _, t := range reads {
		nw, _ := tbCounts(t, n.a.pubs, n.a.subs)
		cq, err := n.cq()
		if err != nil {
			return made, err
		}
		r, err := ring.NewRing(n.dev, ring.RingConfig{Slots: floorSlots, SlotSize: tbSlotSize(n.a.size), Mode: mode, CQ: cq, MaxBatch: tbReadBatch})
		if err != nil {
			return made, err
		}
		n.closes = append(n.closes, r.Close)
		rs := &tbReaderSide{cq: cq, r: r}
		mt := tbMadeTopic{Topic: t}
		if mt.Ring, err = r.Desc().MarshalBinary(); err != nil {
			return made, err
		}
		for range nw {
			qp, err := n.qp(cq)
			if err != nil {
				return made, err
			}
			rs.qps = append(rs.qps, qp)
			ep, err := qp.LocalEndpoint().MarshalBinary()
			if err != nil {
				return made, err
			}
			mt.EPs = append(mt.EPs, ep)
		}
		n.readers[t] = rs
		made.Topics = append(made.Topics, mt)
	}
	for _, t := range writes {
		_, nr := tbCounts(t, n.a.pubs, n.a.subs)
		cq, err := n.cq()
		if err != nil {
			return made, err
		}
		ws := &tbWriterSide{cq: cq}
		if ws.homeQP, err = n.qp(cq); err != nil {
			return made, err
		}
		mt := tbMadeTopic{Topic: t}
		if mt.HomeEP, err = ws.homeQP.LocalEndpoint().MarshalBinary(); err != nil {
			return made, err
		}
		for range nr {
			qp, err := n.qp(cq)
			if err != nil {
				return made, err
			}
			ws.qps = append(ws.qps, qp)
			ep, err := qp.LocalEndpoint().MarshalBinary()
			if err != nil {
				return made, err
			}
			mt.EPs = append(mt.EPs, ep)
		}
		n.writers[t] = ws
		made.Topics = append(made.Topics, mt)
	}
	return made, nil
}

// wireWriters is step B: connect, make the writer, add every reader.
func (n *tbNode) wireWriters(ctx context.Context, ww tbWriterWiring, idle rdma.IdleStrategy, timeout time.Duration) (tbCredits, error) {
	var out tbCredits
	claim, _ := ring.ParseClaimMode(n.a.claim)
	for _, t := range ww.Topics {
		ws := n.writers[t.Topic]
		if ws == nil || len(t.Rings) != len(ws.qps) {
			return out, fmt.Errorf("bench: wiring for topic %d does not match this writer", t.Topic)
		}
		var home ring.HomeDesc
		if err := home.UnmarshalBinary(t.Home); err != nil {
			return out, err
		}
		if err := connect(ctx, ws.homeQP, t.HomeEP); err != nil {
			return out, fmt.Errorf("bench: connect home QP: %w", err)
		}
		w, err := ring.NewWriter(ring.WriterConfig{
			Device: n.dev, CQ: ws.cq, HomeQP: ws.homeQP, Home: home,
			PublisherID: uint32(n.a.index + 1 + 100*t.Topic), Claim: claim,
			MaxBatch: max(64, n.a.batch), StagingSlots: max(1024, 2*n.a.batch, 2*qpDepth(n.dev)),
			Timeout: timeout, Idle: idle,
			OnTargetDropped: func(id uint64, err error) {
				if ws.dropErr == nil {
					ws.dropErr = fmt.Errorf("bench: writer dropped reader %d: %w", id, err)
				}
			},
		})
		if err != nil {
			return out, err
		}
		n.closes = append(n.closes, w.Close)
		ws.w = w
		ct := tbCreditsTopic{Topic: t.Topic}
		for k, rb := range t.Rings {
			if err := connect(ctx, ws.qps[k], t.EPs[k]); err != nil {
				return out, fmt.Errorf("bench: connect to reader %d: %w", k, err)
			}
			var rd ring.RingDesc
			if err := rd.UnmarshalBinary(rb); err != nil {
				return out, err
			}
			cd, err := w.AddTarget(ring.Target{ID: uint64(k), QP: ws.qps[k], Ring: rd})
			if err != nil {
				return out, fmt.Errorf("bench: add reader %d: %w", k, err)
			}
			if rd.Mode == ring.Reliable {
				b, err := cd.MarshalBinary()
				if err != nil {
					return out, err
				}
				ct.Credits = append(ct.Credits, b)
			}
		}
		out.Topics = append(out.Topics, ct)
	}
	return out, nil
}

// wireReaders is step C: connect to every writer, add its credit.
func (n *tbNode) wireReaders(ctx context.Context, rw tbReaderWiring) error {
	for _, t := range rw.Topics {
		rs := n.readers[t.Topic]
		if rs == nil || len(t.EPs) != len(rs.qps) {
			return fmt.Errorf("bench: wiring for topic %d does not match this reader", t.Topic)
		}
		for k, ep := range t.EPs {
			if err := connect(ctx, rs.qps[k], ep); err != nil {
				return fmt.Errorf("bench: connect to writer %d: %w", k, err)
			}
			if len(t.Credits) > 0 {
				var cd ring.CreditDesc
				if err := cd.UnmarshalBinary(t.Credits[k]); err != nil {
					return err
				}
				if err := rs.r.Reader().AddCredit(rs.qps[k], cd); err != nil {
					return fmt.Errorf("bench: credit to writer %d: %w", k, err)
				}
			}
		}
	}
	return nil
}

// tbTx publishes through a ring writer.
type tbTx struct {
	w     *ring.Writer
	buf   []byte
	batch []ring.Tick
	size  int
	codec *msgCodec
}

func newTBTx(w *ring.Writer, size, batch int) *tbTx {
	t := &tbTx{w: w, buf: make([]byte, size*batch), size: size, codec: newCodec(), batch: make([]ring.Tick, batch)}
	for i := range t.batch {
		t.batch[i] = ring.Tick{Type: tick.MessageType, Payload: t.buf[i*size : (i+1)*size]}
	}
	return t
}

func (t *tbTx) send(seq, ts, _ int64) error {
	m := t.buf[:t.size]
	t.codec.encode(m, seq, ts)
	_, err := t.w.Publish(tick.MessageType, m, ts)
	return err
}

func (t *tbTx) sendBatch(seq0 int64, n int, ts, _ int64) error {
	for i := range n {
		t.codec.encode(t.batch[i].Payload, seq0+int64(i), ts)
		t.batch[i].PublishNs = ts
	}
	_, err := t.w.PublishBatch(t.batch[:n])
	return err
}

func (t *tbTx) close() error { return nil } // the node closes the writer

// tbRx reads a ring, one tick per next. Its sequence is the topic's.
type tbRx struct {
	r     *ring.Reader
	codec *msgCodec
	idle  rdma.IdleStrategy
	// pend holds what the last Poll delivered (the ring hands out a run of
	// ticks per call, and a reliable reader writes its credit once per
	// run); next returns it one tick at a time.
	pend    []tbItem
	head    int
	pendErr error
	events  uint64 // sequences named by loss events
	// stopAt is when the parent said every publisher is done (lossy rings
	// only); after stopQuiet with nothing to read, next reports errStopped.
	stopAt atomic.Int64
	lastOK int64
}

type tbItem struct{ seq, ts int64 }

func newTBRx(r *ring.Reader, idle rdma.IdleStrategy) *tbRx {
	return &tbRx{r: r, codec: newCodec(), idle: idle, pend: make([]tbItem, 0, tbReadBatch)}
}

// tbReadBatch bounds one Poll's run of ticks (RingConfig.MaxBatch).
const tbReadBatch = 256

// stopQuiet is how long a stopped lossy reader waits for in-flight ticks.
const stopQuiet = int64(500 * time.Millisecond)

// errStopped: the run ended without every end mark (a lossy ring lost some).
var errStopped = errors.New("bench: stopped by the parent")

// OnTicks decodes a run of ticks (ring.Handler); the views die on return.
func (r *tbRx) OnTicks(ticks []ring.Tick) {
	for i := range ticks {
		t := &ticks[i]
		if len(t.Payload) < MinSize {
			if r.pendErr == nil {
				r.pendErr = errShortTick
			}
			continue
		}
		ts, err := r.codec.decodeBody(t.Payload[offTick:])
		if err != nil {
			if r.pendErr == nil {
				r.pendErr = err
			}
			continue
		}
		r.pend = append(r.pend, tbItem{seq: int64(t.Seq), ts: ts}) // within capacity: at most MaxBatch per call
	}
}

// OnEvent counts sequences the ring names as lost (ring.Handler); the
// subscriber loop counts them again from the sequence gap.
func (r *tbRx) OnEvent(ev ring.Event) { r.events += ev.Count() }

var errShortTick = fmt.Errorf("bench: tick shorter than %d bytes", MinSize)

func (r *tbRx) next(deadline int64) (int64, int64, error) {
	for spins := 0; ; spins++ {
		if r.head < len(r.pend) {
			it := r.pend[r.head]
			r.head++
			return it.seq, it.ts, nil
		}
		if r.pendErr != nil {
			return 0, 0, r.pendErr
		}
		r.pend, r.head = r.pend[:0], 0
		if n := r.r.Poll(r); n > 0 {
			r.idle.Idle(n)
			if len(r.pend) > 0 {
				r.lastOK = nanotime()
			}
			continue
		}
		r.idle.Idle(0)
		if spins&255 == 255 {
			now := nanotime()
			if now > deadline {
				return 0, 0, ErrDeadline
			}
			if at := r.stopAt.Load(); at != 0 && now-max(at, r.lastOK) > stopQuiet {
				return 0, 0, errStopped
			}
		}
	}
}

func (r *tbRx) close() error { return nil }

// tbMain is a tickbus publisher or subscriber child. Args: roleArgs plus
// -side.
func tbMain(args []string) int {
	out := os.Stdout
	fail := func(err error) int {
		_ = writeReport(out, report{Done: true, Err: err.Error()})
		return 1
	}
	side := sideSub
	if len(args) > 0 && (args[0] == sidePub || args[0] == sideSub) {
		side, args = args[0], args[1:]
	}
	a, err := parseRoleArgs(args)
	if err != nil {
		return fail(err)
	}
	pp := a.mode == modePingPong
	if pp && (a.pubs != 1 || a.subs != 1) {
		return fail(fmt.Errorf("%w: ping-pong runs one publisher and one subscriber", ErrInvalidConfig))
	}
	if a.cpu >= 0 {
		if err := pinThread(a.cpu); err != nil {
			return fail(err)
		}
	}
	dev, err := openDevice(tbProvider(a.transport))
	if err != nil {
		return fail(err)
	}
	n := &tbNode{a: a, side: side, dev: dev, writers: map[int]*tbWriterSide{}, readers: map[int]*tbReaderSide{}}
	defer func() { _ = dev.Close() }()
	defer func() { _ = n.close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := bufio.NewReader(os.Stdin)
	readLine := func(v any) error {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("bench: read wiring: %w", err)
		}
		if v == nil {
			return nil
		}
		return decodeWire(line, v)
	}
	idle, _ := rdma.ParseIdle(a.idle)
	run := a.duration + grace

	made, err := n.make(pp)
	if err != nil {
		return fail(err)
	}
	if err := writeReport(out, report{Ready: true, Info: mustJSON(made)}); err != nil {
		return 1
	}
	var ww tbWriterWiring
	if err := readLine(&ww); err != nil {
		return fail(err)
	}
	credits, err := n.wireWriters(ctx, ww, idle, run)
	if err != nil {
		return fail(err)
	}
	if err := writeReport(out, report{Ready: true, Info: mustJSON(credits)}); err != nil {
		return 1
	}
	var rw tbReaderWiring
	if err := readLine(&rw); err != nil {
		return fail(err)
	}
	if err := n.wireReaders(ctx, rw); err != nil {
		return fail(err)
	}
	if err := writeReport(out, report{Ready: true}); err != nil {
		return 1
	}

	var (
		tx txPort
		rx rxPort
	)
	wt, rt := 1, 0 // a subscriber writes topic 1 (ping-pong) and reads topic 0
	if side == sidePub {
		wt, rt = 0, 1
	}
	if ws := n.writers[wt]; ws != nil {
		tx = newTBTx(ws.w, a.size, a.batch)
	}
	var trx *tbRx
	if rs := n.readers[rt]; rs != nil {
		trx = newTBRx(rs.r.Reader(), idle)
		rx = trx
	}
	// From here stdin carries control lines: "go" for a publisher, "stop"
	// for a subscriber (every publisher is done), then EOF (every process
	// has reported; exit).
	ctl, eof := make(chan string, 4), make(chan struct{})
	go func() {
		defer close(eof)
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				return
			}
			ctl <- strings.TrimSpace(line)
		}
	}()
	if trx != nil && a.ringMode == "lossy" && side == sideSub {
		// A lossy ring may lose an end mark to an overrun: once every
		// publisher is done and the ring stays quiet, the run is over.
		go func() {
			for {
				select {
				case l := <-ctl:
					if l == "stop" {
						trx.stopAt.Store(nanotime())
						return
					}
				case <-eof:
					return
				}
			}
		}()
	}
	if side == sidePub {
		select { // "go"
		case <-ctl:
		case <-eof:
			return fail(errors.New("bench: stdin closed before go"))
		}
		start := nanotime() + int64(time.Millisecond)
		end := start + int64(a.duration)
		deadline := end + int64(grace)
		var st txStats
		stopProf, perr := startProfile(a.pprof)
		if perr != nil {
			return fail(perr)
		}
		cpu0 := selfCPU()
		if a.mode == modeThroughput {
			st, err = floodLoop(tx, a.batch, start, end, deadline)
		} else {
			st, err = pacedLoop(tx, rx, idle, newSchedule(start, a.rate, a.duration))
		}
		err = errors.Join(err, stopProf())
		r := report{Done: true, Sent: st.sent, Unsent: st.unsent, StartNs: st.startNs, hist: st.hist, CPUNs: int64(selfCPU() - cpu0)}
		if err == nil {
			err = n.drain(0)
		}
		return finish(out, eof, r, err)
	}
	deadline := nanotime() + int64(a.duration) + int64(grace) + int64(10*time.Second)
	stopProf, perr := startProfile(a.pprof)
	if perr != nil {
		return fail(perr)
	}
	cpu0 := selfCPU()
	st, err := subLoop(rx, tx, a.mode == modeLatency, a.pubs, deadline)
	if errors.Is(err, errStopped) {
		err = nil // every publisher is done; the lost end marks are counted as lost sequences already
	}
	err = errors.Join(err, stopProf())
	r := report{Done: true, Count: st.count, Lost: st.lost, StartNs: st.startNs, LastNs: st.lastNs, hist: st.hist, CPUNs: int64(selfCPU() - cpu0)}
	if err == nil && tx != nil {
		err = n.drain(1)
	}
	return finish(out, eof, r, err)
}

// finish writes the final report, then keeps the process (and its posted
// writes, which a provider like tcp completes asynchronously) alive until
// the parent closes stdin, when every peer has reported.
func finish(out io.Writer, eof <-chan struct{}, r report, err error) int {
	if err != nil {
		r.Err = err.Error()
	}
	if werr := writeReport(out, r); werr != nil || err != nil {
		return 1
	}
	<-eof
	return 0
}

// drain reports a writer's dropped readers: a reader the writer stopped
// writing to is a failure of the run, never silent.
func (n *tbNode) drain(topic int) error {
	ws := n.writers[topic]
	if ws == nil || ws.w == nil {
		return nil
	}
	if ws.dropErr != nil {
		return ws.dropErr
	}
	if st := ws.w.Stats(); st.Dropped > 0 {
		return fmt.Errorf("bench: writer dropped %d readers", st.Dropped)
	}
	return nil
}
