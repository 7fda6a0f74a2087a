package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

const (
	rolePub = "chaos-pub"
	roleSub = "chaos-sub"
	topic   = "chaos"
)

func init() {
	child.Register(rolePub, pubMain)
	child.Register(roleSub, subMain)
}

// roleFlags: what every role takes.
type roleFlags struct {
	nats     string // comma-separated URLs, its own host's first
	host     string // tcp listen address
	name     string // node id
	hostID   string // host id: nodes of one host reach each other over shm
	out      string // record file
	capacity int    // records it has room for
	timeout  time.Duration
	// publisher
	pubID uint32
	claim string // cas or faa
	batch int
	rate  float64 // ticks per second
	subs  int     // subscribers to wait for (bounded) before publishing
	// subscriber
	mode  string // lossy or reliable
	slots int
}

func parse(name string, args []string) (roleFlags, error) {
	var f roleFlags
	var pubID uint
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.nats, "nats", "", "NATS URLs, comma-separated")
	fs.StringVar(&f.host, "host", "127.0.0.1", "tcp listen address")
	fs.StringVar(&f.name, "name", "", "node id")
	fs.StringVar(&f.hostID, "hostid", "", "host id")
	fs.StringVar(&f.out, "out", "", "record file")
	fs.IntVar(&f.capacity, "cap", 1<<22, "records the file has room for")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long the role may run")
	fs.UintVar(&pubID, "pubid", 0, "publisher id stamped on ticks")
	fs.StringVar(&f.claim, "claim", "cas", "cas or faa")
	fs.IntVar(&f.batch, "batch", 1, "ticks per publish")
	fs.Float64Var(&f.rate, "rate", 1000, "ticks per second")
	fs.IntVar(&f.subs, "subs", 0, "subscribers to wait for (at most 20s) before publishing")
	fs.StringVar(&f.mode, "mode", "lossy", "lossy or reliable")
	fs.IntVar(&f.slots, "slots", 0, "ring slots")
	err := fs.Parse(args)
	f.pubID = uint32(pubID)
	return f, err
}

var logger = zerolog.New(os.Stderr).With().Timestamp().Logger().Level(zerolog.InfoLevel)

func open(ctx context.Context, f roleFlags) (*bus.Node, *link.Devices, error) {
	node, err := bus.Open(ctx, bus.Config{NodeID: f.name, HostID: f.hostID, NATS: bus.NATSConfig{URLs: strings.Split(f.nats, ",")}, Logger: &logger})
	if err != nil {
		return nil, nil, err
	}
	return node, link.NewDevices(link.DevicesConfig{HostID: node.HostID(), TCPListen: net.JoinHostPort(f.host, "0"), Logger: logger}), nil
}

// stdinClosed is closed when the parent closes the role's stdin (or dies).
func stdinClosed() <-chan struct{} {
	c := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(c) }()
	return c
}

// out serialises the role's stdout lines.
var out struct {
	sync.Mutex
}

func say(format string, args ...any) {
	out.Lock()
	fmt.Printf(format+"\n", args...)
	out.Unlock()
}

// pubMain publishes paced ticks until stdin closes, recording each: a "P"
// record for every tick Publish numbered, an "F" record for every tick
// whose Publish failed (each attempt is a fresh tick, so a tick is never
// published twice). It prints "READY", "STAT n=… last=… home=… epoch=…
// errs=…" about every 200ms and, after stdin closed, "DONE n=…
// failovers=<ns,…>".
func pubMain(args []string) int {
	fail := func(err error) int { say("ERR %v", err); return 1 }
	f, err := parse(rolePub, args)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	stop := stdinClosed()
	claim := ring.ClaimCAS
	if f.claim == "faa" {
		claim = ring.ClaimFAA
	}
	node, devs, err := open(ctx, f)
	if err != nil {
		return fail(err)
	}
	defer node.Close()
	defer devs.Close()
	rec, err := Create(f.out, f.capacity)
	if err != nil {
		return fail(err)
	}
	defer rec.Close()
	nctx, ncancel := context.WithTimeout(ctx, 30*time.Second) // say why, rather than hang
	pub, err := publisher.New(nctx, node, devs, publisher.Config{Topic: topic, PublisherID: f.pubID, Claim: claim,
		MaxBatch: max(64, f.batch), Idle: rdma.Yield{}, Logger: logger})
	ncancel()
	if err != nil {
		return fail(fmt.Errorf("publisher.New: %w", err))
	}
	defer pub.Close()
	say("READY home=%t", pub.IsHome())
	if f.subs > 0 {
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		_ = pub.WaitSubscribers(wctx, f.subs) // publish anyway: a late subscriber is told what it missed
		wcancel()
	}
	feed, err := publisher.NewFeed(publisher.DefaultFeedConfig())
	if err != nil {
		return fail(err)
	}
	var n, last, errs atomic.Uint64
	statDone := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-statDone:
				return
			case <-t.C:
				say("STAT n=%d last=%d home=%t epoch=%d errs=%d", n.Load(), last.Load(), pub.IsHome(), pub.Epoch(), errs.Load())
			}
		}
	}()
	batch := make([]ring.Tick, f.batch)
	hashes := make([]uint64, f.batch)
	for i := range batch {
		batch[i].Type = tick.MessageType
		batch[i].Payload = make([]byte, tick.Size)
	}
	var tk tick.Tick
	start := time.Now()
	var lastErr error
	var failingSince time.Time
	for sent := 0; ; {
		select {
		case <-stop:
			goto done
		default:
		}
		if d := time.Until(start.Add(time.Duration(float64(sent) / f.rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		now := time.Now().UnixNano()
		for i := range batch {
			feed.Next(&tk, now)
			tk.PubTime = now + int64(i) // unique per tick, so every payload (and hash) is
			if _, err := tick.Encode(batch[i].Payload, &tk); err != nil {
				return fail(err)
			}
			batch[i].PublishNs = tk.PubTime
			hashes[i] = Hash(batch[i].Payload)
		}
		var seq uint64
		if f.batch == 1 {
			seq, err = pub.Publish(tick.MessageType, batch[0].Payload, batch[0].PublishNs)
		} else {
			seq, err = pub.PublishBatch(batch)
		}
		at := time.Now().UnixNano()
		sent += f.batch
		if err != nil {
			errs.Add(1)
			for i := range batch {
				if rerr := rec.Add(Record{Kind: KindFailed, Publisher: f.pubID, B: hashes[i], Ns: at}); rerr != nil {
					return fail(rerr)
				}
			}
			if lastErr == nil || err.Error() != lastErr.Error() {
				logger.Warn().Err(err).Msg("chaos-pub: publish failed; retrying with the next tick")
			}
			if failingSince.IsZero() {
				failingSince = time.Now()
			} else if time.Since(failingSince) > 30*time.Second {
				return fail(fmt.Errorf("publishing failed for 30s: %w", err))
			}
			lastErr = err
			if !errors.Is(err, publisher.ErrNoHome) {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		lastErr, failingSince = nil, time.Time{}
		for i := range batch {
			if rerr := rec.Add(Record{Kind: KindPublished, Publisher: f.pubID, A: seq + uint64(i), B: hashes[i], Ns: at}); rerr != nil {
				return fail(rerr)
			}
		}
		n.Add(uint64(f.batch))
		last.Store(seq + uint64(f.batch) - 1)
	}
done:
	close(statDone)
	if err := pub.Close(); err != nil {
		logger.Warn().Err(err).Msg("chaos-pub: close")
	}
	var fo []string
	for _, d := range pub.Failovers() {
		fo = append(fo, strconv.FormatInt(d.Nanoseconds(), 10))
	}
	if err := rec.Close(); err != nil {
		return fail(err)
	}
	say("DONE n=%d last=%d errs=%d failovers=%s", n.Load(), last.Load(), errs.Load(), strings.Join(fo, ","))
	return 0
}

// recorder is a subscriber's handler: every delivered tick and event into
// the record file. Both run on the polling goroutine.
type recorder struct {
	rec    *Recorder
	n      atomic.Uint64
	events atomic.Uint64
	err    atomic.Pointer[error]
}

func (r *recorder) OnTicks(ts []ring.Tick) {
	now := time.Now().UnixNano()
	for i := range ts {
		if err := r.rec.Add(Record{Kind: KindDelivered, Publisher: ts[i].Publisher, A: ts[i].Seq, B: Hash(ts[i].Payload), Ns: now}); err != nil {
			r.err.CompareAndSwap(nil, &err)
		}
	}
	r.n.Add(uint64(len(ts)))
}

func (r *recorder) OnEvent(ev ring.Event) {
	if err := r.rec.Add(Record{Kind: KindEvent, Sub: uint8(ev.Kind), A: ev.From, B: ev.To, Ns: time.Now().UnixNano()}); err != nil {
		r.err.CompareAndSwap(nil, &err)
	}
	r.events.Add(1)
}

// subMain subscribes and records until stdin closes; it prints "READY",
// "STAT n=… next=… events=…" about every 200ms and "DONE n=… events=…
// lost=…" after Close drained the ring.
func subMain(args []string) int {
	fail := func(err error) int { say("ERR %v", err); return 1 }
	f, err := parse(roleSub, args)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	stop := stdinClosed()
	mode, err := ring.ParseMode(f.mode)
	if err != nil {
		return fail(err)
	}
	node, devs, err := open(ctx, f)
	if err != nil {
		return fail(err)
	}
	defer node.Close()
	defer devs.Close()
	rec, err := Create(f.out, f.capacity)
	if err != nil {
		return fail(err)
	}
	defer rec.Close()
	h := &recorder{rec: rec}
	sub, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: topic, Mode: mode, Slots: f.slots,
		Idle: rdma.Yield{}, StatsInterval: -1, Logger: logger}, h)
	if err != nil {
		return fail(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	say("READY")
	t := time.NewTicker(200 * time.Millisecond)
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-ctx.Done():
			break loop
		case err := <-runErr:
			return fail(fmt.Errorf("run ended: %w", err))
		case <-t.C:
			say("STAT n=%d next=%d events=%d", h.n.Load(), sub.Counters().Next, h.events.Load())
		}
	}
	t.Stop()
	closeErr := sub.Close()
	if err := errors.Join(closeErr, <-runErr); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, subscriber.ErrClosed) {
		logger.Warn().Err(err).Msg("chaos-sub: close")
	}
	if p := h.err.Load(); p != nil {
		return fail(*p)
	}
	if err := rec.Close(); err != nil {
		return fail(err)
	}
	say("DONE n=%d events=%d lost=%d", h.n.Load(), h.events.Load(), sub.Counters().Lost())
	return 0
}
