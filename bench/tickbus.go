package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// The tickbus cases run what users run: every publisher and subscriber
// child is a program of the public API, one tickbus.Client per process
// (tickbus.Connect to the bus's NATS, a server in this process: tbCase),
// Client.Publisher on one side, Client.Subscribe (WithManualPoll: the
// harness's loop polls on its pinned thread) on the other. Discovery, the
// queue-pair and descriptor exchange, the choice of the topic's home (its
// first publisher) and the provider per peer are the bus's, as in
// production; tickbus-tcp forces the tcp provider (WithProvider). Its home
// is where a deployment has it: the publisher, in its own process, whose
// claims are CPU atomics on its own counter (tcp maps a loopback pair in
// one process directly, rdma/tcp/direct.go); the ring writes, the
// subscriber's credits and the journal READs cross tcp (loopback). The
// publisher and subscriber loops are the same as every other case's
// (loops.go).

func init() {
	transports[CaseTickbusShm] = transport{openTx: openTBTx, openRx: openTBRx}
	transports[CaseTickbusTCP] = transport{openTx: openTBTx, openRx: openTBRx}
	transports[CaseTickbusTCPRemoteHome] = transport{openTx: openTBTx, openRx: openTBRx}
}

// tbTopic is the bus topic of the harness's topic t (0: publishers to
// subscribers, 1: the ping-pong way back).
func tbTopic(t int) string { return fmt.Sprintf("bench%d", t) }

// tbSlotSize is the ring and journal slot for a message of size bytes.
func tbSlotSize(size int) int {
	return (ring.SlotHeaderSize + size + ring.SlotAlign - 1) &^ (ring.SlotAlign - 1)
}

// tbMaxBatch bounds one PublishBatch (the public API's limit).
const tbMaxBatch = 512

// tbCase is a tickbus case: children through the public API, on a NATS
// server (with JetStream) in this process.
//
// The server is a bare nats-server, not a tickbus.Client's embedded one: a
// Client here would be a third node on the bus that publishes and
// subscribes nothing, yet heartbeats every 500 ms (a signature, checked by
// each child: 100-300 µs each) and probes its two home buckets every second
// (watch.go); execution traces of the latency run put one burst of slow
// ticks on each of them. A deployment's NATS servers carry no node either.
type tbCase struct {
	pairCase
	srv *server.Server
	dir string // the server's JetStream store
}

// tbLease is the lease of every bench client's topic homes: a run measures
// a steady bus, and the default 1s lease fails a home over when a loaded
// machine starves its renewals (a failover mid-run is not what is timed).
// Every client of the bus holds the same one (the lease bucket has one TTL).
const tbLease = 15 * time.Second

func newTickbusCase(name string) benchCase { return &tbCase{pairCase: pairCase{transport: name}} }

func (c *tbCase) setup(_ context.Context, _ Config) error {
	token, err := bus.EmbeddedToken()
	if err != nil {
		return fmt.Errorf("bench: %s: the bus's NATS: %w", c.transport, err)
	}
	srv, dir, err := bus.ServeNATS("127.0.0.1:0", "tickbus-bench", token)
	if err != nil {
		return fmt.Errorf("bench: %s: the bus's NATS: %w", c.transport, err)
	}
	c.srv, c.dir = srv, dir
	c.url = strings.Replace(srv.ClientURL(), "nats://", "nats://"+token+"@", 1)
	// The NATS server is in this process: its CPU over a run counts, as
	// the nats case counts its server's.
	c.around = func(run func() (phase, error)) (phase, error) {
		cpu0 := selfCPU()
		ph, err := run()
		ph.cpu += selfCPU() - cpu0
		return ph, err
	}
	return nil
}

func (c *tbCase) close() error {
	if c.srv == nil {
		return nil
	}
	c.srv.Shutdown()
	c.srv.WaitForShutdown()
	c.srv = nil
	err := os.RemoveAll(c.dir)
	return err
}

// scale runs a flood with pubs publishers on one topic and subs
// subscribers (Config.Scaling).
func (c *tbCase) scale(ctx context.Context, cfg Config, pubs, subs int) (phase, error) {
	return c.run(ctx, cfg, modeThroughput, 1, pubs, subs, cfg.ThroughputDuration)
}

// tbClient is the child process's one Client, shared by its ports and
// closed with the last of them.
var tbClient struct {
	mu   sync.Mutex
	c    *tickbus.Client
	refs int
}

func tbConnect(a roleArgs) (*tickbus.Client, error) {
	tbClient.mu.Lock()
	defer tbClient.mu.Unlock()
	if tbClient.c == nil {
		opts := []tickbus.Option{tickbus.WithNATS(a.url), tickbus.WithConnectTimeout(30 * time.Second), tickbus.WithLeaseTTL(tbLease)}
		if a.transport == CaseTickbusTCP || a.transport == CaseTickbusTCPRemoteHome {
			opts = append(opts, tickbus.WithProvider(rdma.ProviderTCP))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := tickbus.Connect(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("bench: connect to the bus: %w", err)
		}
		tbClient.c = c
	}
	tbClient.refs++
	return tbClient.c, nil
}

// tbOpen is a port's share of the process's Client and its idle strategy.
func tbOpen(a roleArgs) (*tickbus.Client, rdma.IdleStrategy, error) {
	idle, err := rdma.ParseIdle(a.idle)
	if err != nil {
		return nil, nil, err
	}
	c, err := tbConnect(a)
	return c, idle, err
}

func tbRelease() error {
	tbClient.mu.Lock()
	defer tbClient.mu.Unlock()
	if tbClient.refs--; tbClient.refs > 0 || tbClient.c == nil {
		return nil
	}
	err := tbClient.c.Close()
	tbClient.c = nil
	return err
}

// tbTx publishes through a tickbus.Publisher.
type tbTx struct {
	p     *tickbus.Publisher
	buf   []byte
	batch []tickbus.Message
	size  int
	codec *msgCodec
}

func openTBTx(a roleArgs, topic int) (txPort, error) {
	c, idle, err := tbOpen(a)
	if err != nil {
		return nil, err
	}
	opts := []tickbus.PubOption{
		tickbus.WithSlotSize(tbSlotSize(a.size)), tickbus.WithMaxBatch(min(tbMaxBatch, max(64, a.batch))),
		tickbus.WithPublishIdle(idle), tickbus.WithPublishTimeout(max(5*time.Second, a.duration)),
		tickbus.WithPublisherID(uint32(a.index + 1 + 100*topic)),
	}
	if a.claim == "faa" {
		opts = append(opts, tickbus.WithFetchAndAdd())
	}
	p, err := c.Publisher(tbTopic(topic), opts...)
	if err != nil {
		_ = tbRelease()
		return nil, err
	}
	if topic == 0 {
		// Ready means every subscriber's ring is connected. (On the way
		// back, topic 1, the subscriber process publishes before the
		// publisher process subscribes: that side waits in openTBRx.)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := p.WaitSubscribers(ctx, a.peers)
		if err == nil {
			// Publishers start one after another (runPair), so the i-th
			// finds i+1 credit cells at each reliable ring once its own
			// is attached.
			credits := 0
			if a.ringMode != "lossy" {
				credits = a.index + 1
			}
			err = tbWaitSettled(ctx, a.url, topic, a.peers, credits)
		}
		cancel()
		if err != nil {
			_ = p.Close()
			_ = tbRelease()
			return nil, err
		}
	}
	n := min(tbMaxBatch, a.batch)
	t := &tbTx{p: p, buf: make([]byte, a.size*n), size: a.size, codec: newCodec(), batch: make([]tickbus.Message, n)}
	for i := range t.batch {
		t.batch[i] = tickbus.Message{Type: tickbus.TickType, Payload: t.buf[i*a.size : (i+1)*a.size]}
	}
	return t, nil
}

func (t *tbTx) send(seq, ts, _ int64) error {
	m := t.buf[:t.size]
	t.codec.encode(m, seq, ts)
	_, err := t.p.PublishStamped(tickbus.TickType, m, ts)
	return err
}

// sendBatch publishes n messages, in PublishBatch calls of at most
// tbMaxBatch.
func (t *tbTx) sendBatch(seq0 int64, n int, ts, _ int64) error {
	for n > 0 {
		k := min(n, len(t.batch))
		for i := range k {
			t.codec.encode(t.batch[i].Payload, seq0+int64(i), ts)
			t.batch[i].PublishNs = ts
		}
		if _, err := t.p.PublishBatch(t.batch[:k]); err != nil {
			return err
		}
		seq0, n = seq0+int64(k), n-k
	}
	return nil
}

// check fails the run if the publisher dropped a subscriber: a reader it
// stopped writing to is never a silent loss.
func (t *tbTx) check() error {
	if d := t.p.Stats().Dropped; d > 0 {
		return fmt.Errorf("bench: publisher dropped %d subscribers", d)
	}
	return nil
}

// close flushes what was posted (Publisher.Close waits for it to land).
func (t *tbTx) close() error { return errors.Join(t.p.Close(), tbRelease()) }

// tbRx reads a subscription, one message per next, polling it on the
// caller's thread. Its sequence is the topic's.
type tbRx struct {
	s     *tickbus.Subscription
	codec *msgCodec
	idle  rdma.IdleStrategy
	// pend holds what the last Poll delivered (a run of messages per call;
	// a reliable ring returns its credit once per run); next returns it one
	// at a time.
	pend    []tbItem
	head    int
	pendErr error
	// stopAt is when the parent said every publisher is done; after
	// stopQuiet with nothing to read, next reports errStopped (a lossy
	// ring may lose an end mark to an overrun). lastOK is the time of the
	// idle check that first saw polls up to polled deliver (read on the
	// idle path only: a clock read per delivery would sit between a tick's
	// arrival and the harness's timestamp, which the floor has not).
	stopAt         atomic.Int64
	lastOK         int64
	polled, okSeen int
	// home is the topic's home in tickbus-tcp-remotehome (nil otherwise).
	home *tickbus.Publisher
	// settled answers the publisher process's tbWaitSettled (topic 0;
	// nil otherwise).
	settled *nats.Conn
}

type tbItem struct{ seq, ts int64 }

// tbReadBatch bounds one Poll's run of messages (WithBatch).
const tbReadBatch = 256

// stopQuiet is how long a stopped reader waits for in-flight messages.
const stopQuiet = int64(500 * time.Millisecond)

// errStopped: the run ended without every end mark (a lossy ring lost some,
// counted as lost sequences already).
var errStopped = errors.New("bench: stopped by the parent")

func openTBRx(a roleArgs, topic int) (rxPort, error) {
	c, idle, err := tbOpen(a)
	if err != nil {
		return nil, err
	}
	r := &tbRx{codec: newCodec(), idle: idle, pend: make([]tbItem, 0, tbReadBatch)}
	if a.transport == CaseTickbusTCPRemoteHome && topic == 0 && a.index == 0 {
		// The first publisher of a topic is its home: this one, which
		// publishes nothing, so the harness's publisher claims over tcp.
		home, err := c.Publisher(tbTopic(topic), tickbus.WithSlotSize(tbSlotSize(a.size)), tickbus.WithPublisherID(uint32(1000+a.index)))
		if err != nil {
			_ = tbRelease()
			return nil, fmt.Errorf("bench: the remote home: %w", err)
		}
		r.home = home
	}
	opts := []tickbus.SubOption{
		tickbus.WithManualPoll(), tickbus.WithRing(a.slots, tbSlotSize(a.size)), tickbus.WithBatch(tbReadBatch),
		tickbus.WithSubscriberName(fmt.Sprintf("s%d", a.index)),
	}
	if a.ringMode != "lossy" {
		opts = append(opts, tickbus.Reliable())
	}
	s, err := c.Subscribe(tbTopic(topic), r, opts...)
	if err != nil {
		if r.home != nil {
			_ = r.home.Close()
		}
		_ = tbRelease()
		return nil, err
	}
	r.s = s
	journal := a.transport != CaseTickbusTCPRemoteHome
	if topic == 0 {
		if r.settled, err = tbAnswerSettled(a.url, tbSettledSubject(topic, a.index), s, journal); err != nil {
			_ = r.close()
			return nil, err
		}
	}
	if topic == 1 {
		// The way back: its publisher (the subscriber process) is up; be
		// connected to it, and settled (tbSettle), before this process
		// says it is ready.
		want := tbSettle{journal: journal}
		if a.ringMode != "lossy" {
			want.credits = a.peers // every publisher of the way back is up
		}
		end := time.Now().Add(30 * time.Second)
		for s.Publishers() < 1 || want.missing(s.Counters()) != "" {
			if time.Now().After(end) {
				_ = r.close()
				return nil, fmt.Errorf("bench: %s not settled after 30s: %d publishers; %s", tbTopic(topic), s.Publishers(), want.missing(s.Counters()))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return r, nil
}

// tbSettle is what a subscription attaches after its ring is connected:
// the home's journal and, in a reliable ring, a credit cell per publisher.
// Each attach is a queue-pair exchange over the bus and a connect, 1.2-1.6
// ms of the subscriber process's CPU that landed 60-95 ms into the paced
// run when the run started as soon as the rings were connected (execution
// traces of the latency run, last session): a start-up cost the run then
// timed as ticks' latency. So a publisher starts its run only once every
// subscriber has settled.
type tbSettle struct {
	journal bool // the home's journal is on the ring's provider (not in tickbus-tcp-remotehome, whose home is the subscriber's own process)
	credits int  // credit cells: one per publisher in a reliable ring, 0 in a lossy one
}

// missing says what c has not attached yet ("" once settled).
func (w tbSettle) missing(c tickbus.Counters) string {
	var m []string
	if w.journal && c.JournalEpoch == 0 {
		m = append(m, "the home's journal")
	}
	if c.Credits < w.credits {
		m = append(m, fmt.Sprintf("%d of %d credit cells", w.credits-c.Credits, w.credits))
	}
	return strings.Join(m, ", ")
}

// tbSettledSubject is where subscriber index of topic answers whether it
// has settled.
func tbSettledSubject(topic, index int) string {
	return fmt.Sprintf("tickbus.bench.settled.%s.s%d", tbTopic(topic), index)
}

// tbAnswerSettled answers requests on subject, each naming the credit
// cells it waits for (decimal), with what s has still to attach ("" once
// settled), on a NATS connection of its own: the bench's coordination is
// not the bus's traffic. Its handler runs before the run only (a publisher
// stops asking once settled).
func tbAnswerSettled(url, subject string, s *tickbus.Subscription, journal bool) (*nats.Conn, error) {
	nc, err := natsConnect(url, "tickbus-bench-settled")
	if err != nil {
		return nil, err
	}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		credits, err := strconv.Atoi(string(m.Data))
		if err != nil {
			_ = m.Respond([]byte(fmt.Sprintf("bad request %q", m.Data)))
			return
		}
		_ = m.Respond([]byte(tbSettle{journal: journal, credits: credits}.missing(s.Counters())))
	}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: answer %s: %w", subject, err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: answer %s: %w", subject, err)
	}
	return nc, nil
}

// tbWaitSettled waits until each of subs subscribers of topic says it has
// settled (tbSettle) with at least credits credit cells, or ctx ends.
func tbWaitSettled(ctx context.Context, url string, topic, subs, credits int) error {
	nc, err := natsConnect(url, "tickbus-bench-settle")
	if err != nil {
		return err
	}
	defer nc.Close()
	for j := range subs {
		subject := tbSettledSubject(topic, j)
		for {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			m, err := nc.RequestWithContext(rctx, subject, []byte(strconv.Itoa(credits)))
			cancel()
			if err == nil && len(m.Data) == 0 {
				break
			}
			var why string
			if err != nil {
				why = err.Error()
			} else {
				why = string(m.Data)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("bench: subscriber %d of %s not settled (%s): %w", j, tbTopic(topic), why, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

var errShortTick = fmt.Errorf("bench: tick shorter than %d bytes", MinSize)

// OnMessages decodes a run of messages (tickbus.Handler); the views die on
// return.
func (r *tbRx) OnMessages(ms []tickbus.Message) {
	for i := range ms {
		m := &ms[i]
		if len(m.Payload) < MinSize {
			if r.pendErr == nil {
				r.pendErr = errShortTick
			}
			continue
		}
		ts, err := r.codec.decodeBody(m.Payload[offTick:])
		if err != nil {
			if r.pendErr == nil {
				r.pendErr = err
			}
			continue
		}
		r.pend = append(r.pend, tbItem{seq: int64(m.Seq), ts: ts}) // within capacity: at most WithBatch per call
	}
}

// OnEvent: the subscriber loop counts lost sequences from the sequence
// gap that follows every loss event.
func (r *tbRx) OnEvent(tickbus.Event) {}

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
		if n := r.s.Poll(); n > 0 {
			r.idle.Idle(n)
			r.polled += len(r.pend)
			continue
		}
		r.idle.Idle(0)
		if spins&255 == 255 {
			now := nanotime()
			if now > deadline {
				return 0, 0, ErrDeadline
			}
			if r.polled != r.okSeen {
				r.okSeen, r.lastOK = r.polled, now
			}
			if at := r.stopAt.Load(); at != 0 && now-max(at, r.lastOK) > stopQuiet {
				return 0, 0, errStopped
			}
		}
	}
}

// stopWhenQuiet is the parent's "every publisher is done".
func (r *tbRx) stopWhenQuiet() { r.stopAt.Store(nanotime()) }

func (r *tbRx) close() error {
	if r.settled != nil {
		r.settled.Close()
	}
	err := r.s.Close()
	if r.home != nil {
		err = errors.Join(err, r.home.Close())
	}
	return errors.Join(err, tbRelease())
}
