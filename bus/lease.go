package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Homes are elected in two JetStream key-value buckets, both keyed by topic:
//
//	<prefix>_homes  the lease: Create takes it, Update with the last
//	                revision renews it, the bucket's TTL (MaxAge) expires a
//	                lease nobody renews. The revision of the Create is the
//	                home's epoch.
//	<prefix>_seqs   the home record (homeRecord): epoch, node, the epoch's
//	                first sequence and its reservation, the home's
//	                descriptor. No TTL: it tells a successor where to start.
//
// JetStream's own consensus (Raft in a cluster) decides every Create and
// compare-and-set; tickbus runs no timing window of its own.

// kv returns the two buckets, creating them on first use, and starts the
// node's watchers. A server without JetStream gets ErrNoJetStream.
func (n *Node) kv(ctx context.Context) (leases, seqs jetstream.KeyValue, err error) {
	n.kvMu.Lock()
	defer n.kvMu.Unlock()
	if n.leases != nil {
		return n.leases, n.seqs, nil
	}
	// Bounded on its own: a JetStream still electing its leader must not
	// hold kvMu (and every Publish behind it) for the caller's whole ctx.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	js, err := jetstream.New(n.nc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
			errors.Is(err, nats.ErrNoResponders) {
			return nil, nil, fmt.Errorf("%w: server %s (%v); tickbus elects homes in a JetStream key-value bucket: start nats-server with -js",
				ErrNoJetStream, n.nc.ConnectedUrlRedacted(), err)
		}
		return nil, nil, fmt.Errorf("%w: JetStream account info from %s: %v", ErrConnect, n.nc.ConnectedUrlRedacted(), err)
	}
	replicas := 1
	if len(n.nc.Servers()) >= 3 {
		replicas = 3
	}
	base := strings.ReplaceAll(n.cfg.Prefix, ".", "_")
	lw, sw := n.watches[0], n.watches[1]
	lw.cfg = jetstream.KeyValueConfig{Bucket: base + "_homes", TTL: n.cfg.LeaseTTL, Storage: jetstream.MemoryStorage,
		LimitMarkerTTL: max(time.Second, n.cfg.LeaseTTL), Description: "tickbus: topic home leases", Replicas: replicas}
	sw.cfg = jetstream.KeyValueConfig{Bucket: base + "_seqs", Storage: jetstream.FileStorage,
		Description: "tickbus: topic home records (epoch, start, reserved sequences)", Replicas: replicas}
	if leases, err = openBucket(ctx, js, lw.cfg); err != nil {
		return nil, nil, err
	}
	if seqs, err = openBucket(ctx, js, sw.cfg); err != nil {
		return nil, nil, err
	}
	lw.name, lw.kv, lw.f = lw.cfg.Bucket, leases, n.onLease
	sw.name, sw.kv, sw.f = sw.cfg.Bucket, seqs, n.onRecord
	lwatch, lcancel, err := n.startWatcher(lw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: watch %s_homes: %v", ErrConnect, base, err)
	}
	swatch, scancel, err := n.startWatcher(sw)
	if err != nil {
		go retireWatcher(n.ctx, lwatch, lcancel)
		return nil, nil, fmt.Errorf("%w: watch %s_seqs: %v", ErrConnect, base, err)
	}
	n.leases, n.seqs = leases, seqs
	if st, err := leases.Status(ctx); err == nil {
		replicas := 0
		if ks, ok := st.(*jetstream.KeyValueBucketStatus); ok {
			replicas = ks.StreamInfo().Config.Replicas
		}
		n.log.Info().Str("bucket", st.Bucket()).Int("replicas", replicas).Dur("lease_ttl", st.TTL()).Msg("bus: home buckets ready")
	}
	n.wg.Add(3)
	go n.keepWatching(lw, lwatch, lcancel)
	go n.keepWatching(sw, swatch, scancel)
	go n.probeWatchers(n.watches[:])
	if n.backstop > 0 {
		n.wg.Add(1)
		go n.refreshRecords(seqs)
	}
	return leases, seqs, nil
}

// openBucket opens the bucket cfg names, creating it if it does not exist
// (with cfg.Replicas, or 1 if fewer JetStream servers answer).
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.History = 1
	// Look before creating: a confined identity (a subscriber) may
	// read the buckets but not create or update their streams.
	if kv, err := js.KeyValue(ctx, cfg.Bucket); err == nil {
		return kv, nil
	}
	kv, err := createKV(ctx, js, cfg)
	if err != nil && cfg.Replicas > 1 {
		cfg.Replicas = 1 // fewer JetStream servers than URLs
		kv, err = createKV(ctx, js, cfg)
	}
	if err != nil {
		if kv2, err2 := js.KeyValue(ctx, cfg.Bucket); err2 == nil {
			return kv2, nil // made by another node with another config
		}
		return nil, fmt.Errorf("%w: key-value bucket %s: %v", ErrConnect, cfg.Bucket, err)
	}
	return kv, nil
}

// ensureKV sets up the buckets and watchers in the background, retrying
// until it works or the node closes (subscriptions, which must not wait).
func (n *Node) ensureKV() {
	for attempt := 0; n.ctx.Err() == nil; attempt++ {
		ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
		_, _, err := n.kv(ctx)
		cancel()
		if err == nil {
			return
		}
		if attempt == 0 || errors.Is(err, ErrNoJetStream) {
			n.log.Warn().Err(err).Msg("bus: no home records yet (JetStream); subscribers cannot name a failover's range until it answers")
		}
		if errors.Is(err, ErrNoJetStream) {
			return
		}
		select {
		case <-n.ctx.Done():
		case <-time.After(time.Duration(min(attempt+1, 10)) * 200 * time.Millisecond):
		}
	}
}

// casConflict: a Create found the key, or an Update's revision was not the
// key's last.
func casConflict(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

func (n *Node) leaseValue() []byte {
	return []byte(n.self.ID + " " + strconv.FormatUint(n.self.Incarnation, 10))
}

// getRecord reads the topic's home record; rev 0 and no error: none yet.
func (n *Node) getRecord(ctx context.Context, seqs jetstream.KeyValue, topic string) (homeRecord, uint64, error) {
	e, err := seqs.Get(ctx, kvKey(topic))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return homeRecord{}, 0, nil
	}
	if err != nil {
		return homeRecord{}, 0, fmt.Errorf("%w: read home record of %q: %v", ErrConnect, topic, err)
	}
	r, err := n.readRecord(topic, e.Value())
	if err != nil {
		n.badInput("record", err)
		return homeRecord{}, 0, err
	}
	return r, e.Revision(), nil
}

// currentHome is the topic's home if a live lease backs a finished record:
// ok false while nobody holds the lease or its holder has not published
// its descriptor yet.
func (n *Node) currentHome(ctx context.Context, topic string) (HomeInfo, bool, error) {
	leases, seqs, err := n.kv(ctx)
	if err != nil {
		return HomeInfo{}, false, err
	}
	le, err := leases.Get(ctx, kvKey(topic))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return HomeInfo{}, false, nil
	}
	if err != nil {
		return HomeInfo{}, false, fmt.Errorf("%w: read lease of %q: %v", ErrConnect, topic, err)
	}
	rec, rev, err := n.getRecord(ctx, seqs, topic)
	if err != nil || rev == 0 {
		return HomeInfo{}, false, err
	}
	if string(le.Value()) != rec.Node+" "+strconv.FormatUint(rec.Inc, 10) || len(rec.Desc) == 0 {
		return HomeInfo{}, false, nil // the holder is still fencing its predecessor or making its home
	}
	return rec.info(topic, n.self), true, nil
}

// onLease tells local publications at once when a topic's lease is
// deleted (a home closed) or expires (a delete marker, where the server
// writes them), so that failover does not wait for a heartbeat timeout.
func (n *Node) onLease(topic string, e jetstream.KeyValueEntry) {
	op := e.Operation()
	n.mu.Lock()
	if op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		for _, p := range n.localPubs[topic] {
			p.leaseGone()
		}
	}
	n.wakeLocked(topic)
	n.mu.Unlock()
}

// onRecord hands every new home record to the topic's local publications
// and subscriptions (OnHome): a new reservation, or a new epoch. A
// publication whose home an epoch superseded gets OnHomeLost.
func (n *Node) onRecord(topic string, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	rec, err := n.readRecord(topic, e.Value())
	if err != nil {
		n.badInput("record", err)
		return
	}
	n.newRecord(topic, rec)
}

// newRecord hands a home record newer than the last one seen to the
// topic's local publications and subscriptions.
func (n *Node) newRecord(topic string, rec homeRecord) {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, ok := n.records[topic]
	if ok && (rec.Epoch < old.Epoch || rec.Epoch == old.Epoch && rec.Reserved <= old.Reserved && len(rec.Desc) <= len(old.Desc) && rec.End <= old.End) {
		return
	}
	n.records[topic] = rec
	hi := rec.info(topic, n.self)
	for _, p := range n.localPubs[topic] {
		p.onRecord(hi)
	}
	for _, s := range n.localSubs[topic] {
		s.onHome(hi)
	}
	n.wakeLocked(topic)
}

// recordBackstop bounds how long a node may go without reading the home
// record of each of its topics (refreshRecords), whatever its watchers
// say: a safety net only, since the watchers are kept hearing (watch.go).
const recordBackstop = 5 * time.Second

// refreshRecords reads the record of every topic this node publishes or
// subscribes every n.backstop (recordBackstop, whatever the lease: with
// the default 750 ms lease, LeaseTTL/2 would read every topic 2.7 times a
// second), and once after every reconnect. The watchers deliver every
// record; this read is what is left if one of them went deaf unnoticed.
func (n *Node) refreshRecords(seqs jetstream.KeyValue) {
	defer n.wg.Done()
	t := time.NewTicker(n.backstop)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.reread:
		}
		if !n.connected.Load() {
			continue
		}
		n.mu.Lock()
		topics := map[string]bool{}
		for t := range n.localPubs {
			topics[t] = true
		}
		for t := range n.localSubs {
			topics[t] = true
		}
		n.mu.Unlock()
		for topic := range topics {
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
			rec, rev, err := n.getRecord(ctx, seqs, topic)
			cancel()
			if err == nil && rev != 0 {
				n.newRecord(topic, rec)
			}
		}
	}
}

// wakeCh is closed at the topic's next lease or record change. Called
// with n.mu.
func (n *Node) wakeChLocked(topic string) chan struct{} {
	c := n.wakes[topic]
	if c == nil {
		c = make(chan struct{})
		n.wakes[topic] = c
	}
	return c
}

func (n *Node) wakeLocked(topic string) {
	if c := n.wakes[topic]; c != nil {
		close(c)
		delete(n.wakes, topic)
	}
}

// fenceAfter is how long after its last renewal a home gives itself up:
// three quarters of the lease, so claims it granted land before the lease
// can expire elsewhere.
func (n *Node) fenceAfter() time.Duration { return n.cfg.LeaseTTL * 3 / 4 }

// LeaseEnd is, for a home this publication holds or held in epoch, when
// the home gives itself up unless it renews its lease again (its last
// renewal plus three quarters of LeaseTTL); the zero time if it held no
// home in that epoch. A claim on the home's counter completed after it
// must not be written (ring.Writer.SetLeaseEnd): the process may have
// stalled past its lease (SIGSTOP, CPU starvation) and run its publishing
// goroutine before its lease loop could fence the home.
func (p *Publication) LeaseEnd(epoch uint64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leaseEpoch != epoch {
		return time.Time{}
	}
	return p.leaseEnd
}

// setLease records the home's lease end and hands it to OnLease.
func (p *Publication) setLease(epoch uint64, end time.Time) {
	p.mu.Lock()
	p.leaseEpoch, p.leaseEnd = epoch, end
	p.mu.Unlock()
	if f := p.spec.OnLease; f != nil {
		f(epoch, end)
	}
}

// holdLease renews the lease of a home held here every LeaseTTL/4, and
// runs extendReservation beside it. A renewal that finds the lease taken,
// or no renewal for 3/4 of the TTL, loses the home before the lease can
// expire elsewhere; so does a home record taken by another (which
// extendReservation reports). The two run apart: a slow reservation
// update, bounded only by the fence, used to hold the renewals back and
// lose the lease under load (with a small ReserveChunk, often).
func (n *Node) holdLease(topic string, s *homeSlot, leases, seqs jetstream.KeyValue) {
	defer n.wg.Done()
	defer close(s.done)
	ttl := n.cfg.LeaseTTL
	// Renew four times a lease, each try bounded to one interval, so a
	// slow reply still leaves two more tries before the fence.
	renewEvery, fenceAfter := ttl/4, n.fenceAfter()
	// The loop wakes when something is due (the next renewal, or the
	// fence), not on a fixed tick: a 25 ms ticker woke the home's process
	// 40 times a second for nothing, each wake-up a thread taken from a
	// core a hot thread needs.
	val := n.leaseValue()
	lastRenew := s.leaseAt
	t := time.NewTimer(nextLeaseWake(time.Now(), lastRenew.Add(renewEvery), s.leaseAt.Add(fenceAfter)))
	defer t.Stop()
	ectx, estop := context.WithCancel(n.ctx)
	taken := make(chan error, 1)
	edone := make(chan struct{})
	go n.extendReservation(ectx, topic, s, seqs, taken, edone)
	defer func() { estop(); <-edone }() // no extension after the home is given up
	for {
		select {
		case <-s.stop:
			estop()
			<-edone
			wctx, wcancel := context.WithTimeout(context.Background(), endBudget*n.cfg.RequestTimeout)
			n.writeEnd(wctx, topic, s, seqs) // before the lease goes: a successor's record comes after it
			wcancel()
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
			if err := leases.Delete(ctx, kvKey(topic), jetstream.LastRevision(s.leaseRev)); err != nil {
				n.log.Debug().Err(err).Str("topic", topic).Msg("bus: delete lease")
			}
			cancel()
			return
		case <-n.ctx.Done():
			return
		case err := <-taken:
			n.loseHome(topic, s, err)
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(s.leaseAt) >= fenceAfter {
			n.loseHome(topic, s, fmt.Errorf("%w: lease of %q not renewed for %v", ErrHomeLost, topic, now.Sub(s.leaseAt)))
			return
		}
		if now.Sub(lastRenew) >= renewEvery {
			lastRenew = now
			ctx, cancel := context.WithTimeout(n.ctx, fenceAfter-now.Sub(s.leaseAt))
			rev, err := leases.Update(ctx, kvKey(topic), val, s.leaseRev)
			cancel()
			at := s.leaseAt
			if err == nil {
				s.leaseRev, s.leaseAt = rev, now
			} else if lost := n.checkLease(topic, s, leases, val, now, err); lost != nil {
				n.loseHome(topic, s, lost)
				return
			}
			if s.leaseAt != at {
				s.owner.setLease(s.epoch, s.leaseAt.Add(fenceAfter))
			}
		}
		t.Reset(nextLeaseWake(time.Now(), lastRenew.Add(renewEvery), s.leaseAt.Add(fenceAfter)))
	}
}

// nextLeaseWake is how long holdLease sleeps: until the next renewal is
// due or the fence, whichever comes first, and at least a millisecond (a
// renewal that failed is tried again at its next turn, as before).
func nextLeaseWake(now, renewAt, fenceAt time.Time) time.Duration {
	return max(time.Millisecond, min(renewAt.Sub(now), fenceAt.Sub(now)))
}

// writeEnd records, before a closing home deletes its lease, the counter
// it ended at (PublishSpec.EndCounter) in its record: a compare-and-set on
// the record's last revision, so a successor's record is never touched.
// Subscribers learn from it which sequences were handed out, and name
// those they never received (a publisher that had stopped writing to them)
// instead of ending in silence. Best effort: without NATS, or when the
// counter is unknown, the record stays as it was.
func (n *Node) writeEnd(ctx context.Context, topic string, s *homeSlot, seqs jetstream.KeyValue) {
	f := s.owner.spec.EndCounter
	if f == nil || !n.connected.Load() {
		return
	}
	c := f()
	n.mu.Lock()
	rec, rev := s.rec, s.rev
	n.mu.Unlock()
	if c == 0 || c < rec.Start || c > rec.Reserved || rec.End != 0 {
		return
	}
	rec.End = c
	b, err := n.encodeRecord(topic, rec)
	if err == nil {
		err = n.updateRetrying(ctx, seqs, topic, b, rev)
	}
	if err != nil {
		n.log.Info().Err(err).Str("topic", topic).Uint64("end", c).Msg("bus: could not write where the closing home's epoch ended")
		return
	}
	n.log.Info().Str("topic", topic).Uint64("epoch", rec.Epoch).Uint64("end", c).Msg("bus: the closing home's epoch ended here")
}

// updateRetrying updates topic's record at revision rev, one try per
// RequestTimeout, until it is written, a compare-and-set conflict says
// another wrote first, or ctx ends: a stream whose leader is being elected
// (a server of the cluster just died) answers nothing for seconds.
func (n *Node) updateRetrying(ctx context.Context, seqs jetstream.KeyValue, topic string, b []byte, rev uint64) error {
	for {
		actx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
		_, err := seqs.Update(actx, kvKey(topic), b, rev)
		cancel()
		if err == nil || casConflict(err) || ctx.Err() != nil {
			return err
		}
		n.log.Debug().Err(err).Str("topic", topic).Msg("bus: write where the closing home's epoch ended: trying again")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// endBudget bounds writeEnd, in request timeouts: a closing home waits
// that long at most for the record to take where its epoch ended.
const endBudget = 3

// extendReservation extends the reservation of a home held here when its
// counter (PublishSpec.HomeCounter) comes within half a chunk of it, until
// ctx ends. A record taken by another (a compare-and-set conflict) is sent
// on taken and ends it; any other failure is retried (claimants stop at
// the reserved mark on their own). It closes done when it returns.
func (n *Node) extendReservation(ctx context.Context, topic string, s *homeSlot, seqs jetstream.KeyValue, taken chan<- error, done chan<- struct{}) {
	defer close(done)
	f := s.owner.spec.HomeCounter
	if f == nil {
		return
	}
	t := time.NewTicker(min(n.cfg.LeaseTTL/20, 25*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c := f()
		n.mu.Lock()
		rec, rrev := s.rec, s.rev
		n.mu.Unlock()
		if c+n.cfg.ReserveChunk/2 < rec.Reserved {
			continue
		}
		rec.Reserved = max(c, rec.Reserved) + n.cfg.ReserveChunk
		b, err := n.encodeRecord(topic, rec)
		if err == nil {
			uctx, cancel := context.WithTimeout(ctx, n.fenceAfter())
			var rev uint64
			rev, err = seqs.Update(uctx, kvKey(topic), b, rrev)
			cancel()
			if err == nil {
				n.mu.Lock() // resolveHome and FindHome read rec under n.mu
				s.rec, s.rev = rec, rev
				n.mu.Unlock()
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		if casConflict(err) {
			taken <- fmt.Errorf("%w: home record of %q taken: %v", ErrHomeLost, topic, err)
			return
		}
		if ok, held := n.limiter.allow("reserve/"+topic, time.Now()); ok {
			n.log.Warn().Err(err).Str("topic", topic).Int("suppressed", held).Msg("bus: extend reservation failed; retrying")
		}
	}
}

// checkLease looks at the lease after a renewal failed: a renewal that
// timed out may have landed (the lease holds our value at a newer
// revision: adopt it), a conflict or a missing key means the lease is
// gone (returned as the reason), anything else is retried.
func (n *Node) checkLease(topic string, s *homeSlot, leases jetstream.KeyValue, val []byte, sent time.Time, renewErr error) error {
	// Bounded by the fence too: a look that outlasts it would keep the
	// home granting claims after it must have given up (the chaos test's
	// homes gave up at 1s of a 1s lease, not at 3/4).
	left := n.fenceAfter() - time.Since(s.leaseAt)
	if left <= 0 {
		return fmt.Errorf("%w: lease of %q not renewed for %v (%v)", ErrHomeLost, topic, time.Since(s.leaseAt), renewErr)
	}
	ctx, cancel := context.WithTimeout(n.ctx, min(n.cfg.LeaseTTL/4, left))
	defer cancel()
	e, err := leases.Get(ctx, kvKey(topic))
	switch {
	case err == nil && bytes.Equal(e.Value(), val):
		if e.Revision() > s.leaseRev {
			s.leaseRev, s.leaseAt = e.Revision(), sent // stored after we sent it
		}
		return nil
	case err == nil:
		return fmt.Errorf("%w: lease of %q taken by %q", ErrHomeLost, topic, e.Value())
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: lease of %q gone (%v)", ErrHomeLost, topic, renewErr)
	}
	n.log.Warn().Err(renewErr).Str("topic", topic).Msg("bus: lease renewal failed; retrying")
	return nil
}

// loseHome gives up a home whose lease is gone: its query subscription
// goes and local publications get OnHomeLost.
func (n *Node) loseHome(topic string, s *homeSlot, reason error) {
	n.mu.Lock()
	if n.homes[topic] == s {
		delete(n.homes, topic)
		n.homeGoneLocked(topic, n.self.ID, reason)
	}
	n.wakeLocked(topic)
	n.mu.Unlock()
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
	n.log.Warn().Str("topic", topic).Err(reason).Msg("bus: this node lost the topic's home")
}

// createKV is CreateKeyValue (never an update: a confined publisher may
// create the buckets, not change them) retried with 2s per attempt until ctx
// ends: on a cluster just started, with several nodes creating the bucket
// at once, a request can go unanswered, and one attempt with the whole ctx
// would wait all of it (i9t: the chaos test saw every node time out).
func createKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := js.CreateKeyValue(actx, cfg)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return kv, err
		}
	}
}
