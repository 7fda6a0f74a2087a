package bus

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeKV answers Update at once with the next revision, counting the
// calls, or (hang) only when the caller's context ends, as a JetStream
// too slow to answer does; Delete succeeds. Nothing else is called.
type fakeKV struct {
	jetstream.KeyValue
	hang    bool
	updates atomic.Int32
}

func (k *fakeKV) Update(ctx context.Context, _ string, _ []byte, last uint64) (uint64, error) {
	k.updates.Add(1)
	if k.hang {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return last + 1, nil
}

func (k *fakeKV) Delete(context.Context, string, ...jetstream.KVDeleteOpt) error { return nil }

// A home whose reservation update hangs (the home record's bucket slow to
// answer) keeps renewing its lease and stays home: the reservation is
// extended beside the renewals, not in their way. (In one loop, an update
// bounded by the fence held every renewal back until the fence, and the
// home gave itself up with its lease still good.)
func TestLease_ReservationUpdateHangs_RenewalsGoOnAndTheHomeStays(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a lease past its fence (4 s); skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 4 * time.Second // renew every 1 s, fence at 3 s
	n, err := Open(ctx, Config{NodeID: "slowres", LeaseTTL: ttl, ReserveChunk: 1000})
	require.NoError(t, err)
	defer n.Close()
	leases, seqs := &fakeKV{}, &fakeKV{hang: true}
	p := &Publication{n: n, spec: PublishSpec{Topic: "r", HomeCounter: func() uint64 { return 1 }}}
	s := &homeSlot{owner: p, epoch: 1, leaseRev: 1, leaseAt: time.Now(), rec: homeRecord{Epoch: 1, Start: 1, Reserved: 1},
		stop: make(chan struct{}), done: make(chan struct{})}
	n.mu.Lock()
	n.homes["r"] = s
	n.mu.Unlock()
	n.wg.Add(1)
	go n.holdLease("r", s, leases, seqs)

	time.Sleep(n.fenceAfter() + ttl/4) // past the fence: only renewals keep the home
	n.mu.Lock()
	held := n.homes["r"] == s
	n.mu.Unlock()
	assert.True(t, held, "the home is kept while its reservation update hangs")
	assert.GreaterOrEqual(t, leases.updates.Load(), int32(2), "the lease was renewed meanwhile")
	assert.Positive(t, seqs.updates.Load(), "the reservation was being extended")
	assert.True(t, p.LeaseEnd(1).After(time.Now()), "the lease end moved on: claims go on")

	close(s.stop)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease loop did not stop: a hung extension must not hold it")
	}
}
