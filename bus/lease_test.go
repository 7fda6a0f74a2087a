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
