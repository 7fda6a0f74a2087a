package bus

import (
	"context"
	"testing"
	"time"
)

// A lease nobody renews expires within LeaseTTL, and every node's watcher
// hears of it (the bucket's limit markers), so the others fail over
// without waiting for a heartbeat timeout.
func TestLease_Unrenewed_ExpiresAndWatchersHearIt(t *testing.T) {
	cfg := Config{NodeID: "lw", LeaseTTL: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	leases, _, err := n.kv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	created := n.wakeChLocked("x")
	n.mu.Unlock()
	if _, err := leases.Create(ctx, "x", []byte("someone 1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-created:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not see the lease taken")
	}
	n.mu.Lock()
	expired := n.wakeChLocked("x")
	n.mu.Unlock()
	start := time.Now()
	select {
	case <-expired:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher never heard the lease expire")
	}
	if _, err := leases.Get(ctx, "x"); err == nil {
		t.Fatal("the lease is still there after the watcher heard it go")
	}
	t.Logf("lease expiry heard %v after the watcher saw it taken (TTL 1s)", time.Since(start))
}

// A home that stops renewing (as a crashed or stopped process does, without
// deleting its lease) is succeeded once the lease expires: the successor
// learns it from the expiry marker, takes the lease and starts at the
// reservation. The time from the last renewal to the new home is logged
// (it is at most LeaseTTL plus the election).
func TestLease_HomeStopsRenewing_SuccessorTakesOverAtReservation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Open(ctx, Config{NodeID: "crash-a", LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, Config{NodeID: "crash-b", LeaseTTL: time.Second, NATS: NATSConfig{URLs: []string{a.ClientURL()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	spec := func(lost chan<- HomeInfo) PublishSpec {
		return PublishSpec{Topic: "c",
			NewHome:    func(context.Context, string, uint64) ([]byte, error) { return []byte("h"), nil },
			AcceptHome: func(context.Context, ConnectRequest) (ConnectReply, error) { return ConnectReply{}, nil },
			OnHomeLost: func(h HomeInfo, _ error) { lost <- h }}
	}
	pa, err := a.Publish(ctx, spec(make(chan HomeInfo, 4)))
	if err != nil {
		t.Fatal(err)
	}
	lostB := make(chan HomeInfo, 4)
	pb, err := b.Publish(ctx, spec(lostB))
	if err != nil {
		t.Fatal(err)
	}
	old := pb.Home()
	if !pa.IsHome() || old.Local {
		t.Fatal("a should be home")
	}
	// a "crashes": its lease loop stops without deleting the lease
	a.mu.Lock()
	s := a.homes["c"]
	a.mu.Unlock()
	stopped := time.Now()
	a.cancel()
	<-s.done
	select {
	case <-lostB:
	case <-time.After(5 * time.Second):
		t.Fatal("b never heard the home go")
	}
	heard := time.Since(stopped)
	h, err := pb.Rehome(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(stopped)
	if !h.Local || h.Epoch <= old.Epoch || h.Start != old.Reserved {
		t.Fatalf("new home %+v after %+v: want b, a newer epoch, starting at the old reservation", h, old)
	}
	t.Logf("home stopped renewing; successor heard it after %v, was home after %v (LeaseTTL 1s)", heard, took)
}

// The home's publication learns, before its first claim and at every
// renewal, when the home gives itself up unless it renews again
// (OnLease, LeaseEnd): its writer refuses claims after that (the chaos
// test's SIGCONTed home wrote its own claims over a newer epoch's ticks).
func TestLease_OnLease_EndAtTakeoverAndEveryRenewal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const ttl = 2 * time.Second // renewals every 500ms: a loaded machine renews in time
	n, err := Open(ctx, Config{NodeID: "le", LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	type lease struct {
		epoch    uint64
		end, now time.Time
	}
	got := make(chan lease, 64)
	before := time.Now()
	p, err := n.Publish(ctx, PublishSpec{Topic: "le",
		NewHome:    func(context.Context, string, uint64) ([]byte, error) { return []byte("h"), nil },
		AcceptHome: func(context.Context, ConnectRequest) (ConnectReply, error) { return ConnectReply{}, nil },
		OnLease: func(epoch uint64, end time.Time) {
			select {
			case got <- lease{epoch, end, time.Now()}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	home := p.Home()
	if !home.Local {
		t.Fatal("the only publisher is not the home")
	}
	first := <-got // set before Publish returned
	if first.epoch != home.Epoch || first.end.Before(before) || first.end.After(first.now.Add(ttl*3/4)) {
		t.Fatalf("first lease end %v (epoch %d), taken after %v, home epoch %d: want the lease taken plus at most 3/4 of the TTL",
			first.end, first.epoch, before, home.Epoch)
	}
	var last lease
	for range 3 {
		select {
		case l := <-got:
			if l.epoch != home.Epoch || !l.end.After(first.end) || l.end.After(l.now.Add(ttl*3/4)) {
				t.Fatalf("renewal's lease end %v (epoch %d, at %v), first %v: want later than the first, at most 3/4 TTL ahead", l.end, l.epoch, l.now, first.end)
			}
			last = l
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal reported")
		}
	}
	if e := p.LeaseEnd(home.Epoch); e.Before(last.end) {
		t.Fatalf("LeaseEnd %v, before the last reported %v", e, last.end)
	}
	if e := p.LeaseEnd(home.Epoch + 1); !e.IsZero() {
		t.Fatalf("LeaseEnd of an epoch never held: %v, want zero", e)
	}
}
