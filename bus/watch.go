package bus

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A node hears the home buckets through one JetStream key-value watcher
// each: an ordered push consumer. Such a watcher can go deaf and say
// nothing. A server restart loses its consumer, and nats.go notices only
// when two idle heartbeats (5 s apart) are missed: it recreates the
// consumer at its next check, up to 10 s after the reconnect. A recreation
// that fails with anything but a timeout ends the subscription (Updates
// closes), after which the watcher never hears again; and a consumer
// deleted on the server (an operator, a lost stream) goes unnoticed for
// 10-20 s.
//
// So the node keeps its watchers itself (keepWatching, probeWatchers):
//   - after every reconnect it replaces both watchers with new ones,
//     whose initial values are a fresh read of every key;
//   - a watcher whose Updates channel closes is replaced;
//   - every watchProbe it reads each bucket's last revision (one request
//     per bucket, however many topics), and a watcher that has not
//     delivered the revision the previous probe read, one probe later, is
//     deaf: it is replaced. So is one whose bucket's stream went back
//     (recreated: its consumers are gone);
//   - a bucket the server lost (the leases are a memory stream) is made
//     again, as at first use.
//
// A replaced watcher is still heard until its successor is up (make before
// break). The per-topic re-read (refreshRecords) stays only as a slow
// backstop. A bucket keeps one revision per key, so a record that a deaf
// watcher missed and that was overwritten before its successor started is
// never heard: an intermediate epoch can go unseen (the successor hears
// the newest), and a subscriber's reader, which knows one epoch's start,
// then names that epoch's whole range an overrun, its ticks included:
// reported lost, never silent, but lost.

// watchProbe is how often a node checks that its watchers keep up with
// their buckets; a watcher deaf to a new revision is restarted within two.
const watchProbe = time.Second

// watchStartTimeout bounds starting one watcher (creating its consumer).
const watchStartTimeout = 5 * time.Second

// bucketWatch is one home bucket as the node hears it. keepWatching owns
// the bucket's watcher; probeWatchers reads seen and gen and asks for a
// restart.
type bucketWatch struct {
	name string                   // the bucket, for logs
	cfg  jetstream.KeyValueConfig // to make it again if the server lost it
	kv   jetstream.KeyValue
	f    func(topic string, e jetstream.KeyValueEntry)
	// seen is the highest revision the current watcher has delivered;
	// set to 0 before each start. Written by keepWatching, read by
	// probeWatchers.
	seen atomic.Uint64
	// base is the bucket's last revision just before the current watcher
	// started (its initial values cover up to there), or noBase if that
	// read failed. Stored before gen moves.
	base atomic.Uint64
	// gen counts the watchers started; probeWatchers starts its checks
	// afresh when it changes.
	gen atomic.Uint64
	// restart carries why the current watcher must be replaced.
	restart chan string
	// replacing is set while keepWatching starts a successor: the probe
	// waits for it.
	replacing atomic.Bool
}

func newBucketWatch() *bucketWatch { return &bucketWatch{restart: make(chan string, 1)} }

// askRestart asks for a new watcher unless a request is already pending.
func (b *bucketWatch) askRestart(reason string) {
	select {
	case b.restart <- reason:
	default:
	}
}

// noBase: the bucket's last revision before a watcher started is unknown.
const noBase = ^uint64(0)

// startWatcher starts a watcher of every key of b, reading the bucket's
// last revision first (b.base). nats.go ends a watcher when its context
// ends, so the start is bounded by a timer that cancels that context, not
// by a deadline on it.
func (n *Node) startWatcher(b *bucketWatch) (jetstream.KeyWatcher, context.CancelFunc, error) {
	b.seen.Store(0)
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
	base, err := lastRevision(rctx, b.kv)
	rcancel()
	if err != nil {
		base = noBase
	}
	b.base.Store(base)
	ctx, cancel := context.WithCancel(n.ctx)
	t := time.AfterFunc(watchStartTimeout, cancel)
	w, err := b.kv.WatchAll(ctx)
	if !t.Stop() && err == nil {
		go retireWatcher(n.ctx, w, cancel) // ctx is done: the watcher ends
		err = fmt.Errorf("no consumer within %v", watchStartTimeout)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return w, cancel, nil
}

// retireWatcher stops a watcher and reads what it still delivers until
// its Updates channel closes: nats.go's delivery blocks on a full channel
// while holding the watcher's lock, which its close handler needs.
// Stopping deletes the consumer, a request that can take a while when
// the server is away, so this runs on its own goroutine.
func retireWatcher(ctx context.Context, w jetstream.KeyWatcher, cancel context.CancelFunc) {
	_ = w.Stop()
	cancel()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		}
	}
}

// keepWatching hands every update of b's watcher to b.f until the node
// closes, and replaces the watcher whenever it ends or a restart is asked
// for (a reconnect, probeWatchers). Make before break: the old watcher is
// still heard until its successor is up, since it may be well (a
// reconnect to another server of a cluster that still holds its
// consumer) while the successor's consumer takes seconds to make (a
// cluster electing stream leaders).
func (n *Node) keepWatching(b *bucketWatch, w jetstream.KeyWatcher, cancel context.CancelFunc) {
	defer n.wg.Done()
	b.gen.Add(1)
	for {
		reason := n.hear(b, w)
		stop, relayed := make(chan struct{}), make(chan struct{})
		go relay(n.ctx, b, w, stop, relayed)
		b.replacing.Store(true) // the probe skips b until gen has moved
		next, ncancel, ok := n.successor(b, reason)
		if ok {
			b.gen.Add(1)
		}
		b.replacing.Store(false)
		close(stop)
		<-relayed
		go retireWatcher(n.ctx, w, cancel)
		if !ok {
			return // the node closed
		}
		w, cancel = next, ncancel
		n.watchRestarts.Add(1)
		if ok, held := n.limiter.allow("rewatch/"+b.name, time.Now()); ok {
			n.log.Info().Str("bucket", b.name).Str("reason", reason).Int("suppressed", held).Msg("bus: home watcher restarted")
		}
	}
}

// relay hands what a watcher being replaced still delivers to b.f (not
// counted in b.seen, which is its successor's) until stop closes, the
// watcher ends or ctx does; it closes done when it returns.
func relay(ctx context.Context, b *bucketWatch, w jetstream.KeyWatcher, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				b.f(kvTopic(e.Key()), e)
			}
		}
	}
}

// successor starts a new watcher of b, retrying with a growing wait,
// until it is up (ok) or the node closes.
func (n *Node) successor(b *bucketWatch, reason string) (jetstream.KeyWatcher, context.CancelFunc, bool) {
	remade := false
	for attempt := 0; n.ctx.Err() == nil; attempt++ {
		w, cancel, err := n.startWatcher(b)
		if err == nil {
			return w, cancel, true
		}
		if !remade && (errors.Is(err, nats.ErrStreamNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)) {
			remade = true
			// A server restarted without its memory streams (the
			// leases): make the bucket again, as at first use, or
			// nobody here could take a lease again.
			if err = n.remakeBucket(b, err); err == nil {
				continue
			}
		}
		if ok, held := n.limiter.allow("watch/"+b.name, time.Now()); ok {
			n.log.Warn().Err(err).Str("bucket", b.name).Str("reason", reason).Int("suppressed", held).
				Msg("bus: cannot restart the home watcher; retrying")
		}
		select {
		case <-n.ctx.Done():
		case <-b.restart: // already restarting
		case <-time.After(time.Duration(min(attempt+1, 25)) * 200 * time.Millisecond):
		}
	}
	return nil, nil, false
}

// remakeBucket creates b's bucket again, as kv did; the node's handle on
// it stays good (it names the stream). If it cannot, it returns why the
// watcher could not start and why the bucket could not be made.
func (n *Node) remakeBucket(b *bucketWatch, watchErr error) error {
	js, err := jetstream.New(n.nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(n.ctx, watchStartTimeout)
		_, err = openBucket(ctx, js, b.cfg)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("%w; making the bucket again: %w", watchErr, err)
	}
	n.log.Warn().Str("bucket", b.name).Msg("bus: the server had lost a home bucket; made it again")
	return nil
}

// hear runs b.f for every update of w, with the entry's topic, until the
// node closes, the watcher ends, or a restart is asked for; it returns
// why it stopped. The nil that ends the initial values is skipped.
func (n *Node) hear(b *bucketWatch, w jetstream.KeyWatcher) string {
	for {
		select {
		case <-n.ctx.Done():
			return "node closed"
		case reason := <-b.restart:
			return reason
		case e, ok := <-w.Updates():
			if !ok {
				return "the watcher ended"
			}
			if e != nil {
				// heard, whether or not f keeps up: the probe tests the
				// consumer, not this node's speed
				if r := e.Revision(); r > b.seen.Load() {
					b.seen.Store(r) // only this goroutine stores
				}
				b.f(kvTopic(e.Key()), e)
			}
		}
	}
}

// probeWatchers checks every watchProbe, while connected, that each
// watcher has delivered the last revision its bucket had one probe
// before, and restarts one that has not.
func (n *Node) probeWatchers(bs []*bucketWatch) {
	defer n.wg.Done()
	t := time.NewTicker(n.probeEvery)
	defer t.Stop()
	// per bucket: the watcher generation checked, the bucket's last
	// revision before that watcher started (b.base, or the first probe's
	// if unknown), and at the previous probe
	type probe struct {
		ok              bool
		gen, base, prev uint64
	}
	ps := make([]probe, len(bs))
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		for i, b := range bs {
			p := &ps[i]
			if !n.connected.Load() {
				p.ok = false // a reconnect restarts the watchers anyway
				continue
			}
			gen := b.gen.Load()
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
			last, err := lastRevision(ctx, b.kv)
			cancel()
			seen := b.seen.Load()
			// b.seen and b.base are reset while a successor starts:
			// only a look wholly within one generation counts
			if err != nil || b.replacing.Load() || gen != b.gen.Load() {
				p.ok = false
				continue
			}
			if !p.ok || p.gen != gen {
				base := b.base.Load()
				if base == noBase {
					base = last
				}
				*p = probe{ok: true, gen: gen, base: base, prev: base}
			}
			switch {
			case last < p.base:
				p.ok = false
				b.askRestart(fmt.Sprintf("the bucket's stream went back from revision %d to %d (recreated)", p.base, last))
			case p.prev > p.base && seen < p.prev:
				p.ok = false
				b.askRestart(fmt.Sprintf("deaf: revision %d not delivered after %v (last delivered %d)", p.prev, n.probeEvery, seen))
			default:
				p.prev = last
			}
		}
	}
}

// lastRevision is the revision of the last message in kv's stream.
func lastRevision(ctx context.Context, kv jetstream.KeyValue) (uint64, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, errors.New("bus: key-value status without stream info")
	}
	return bs.StreamInfo().State.LastSeq, nil
}
