package rdmatest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// opTimeout bounds every wait for a completion or a state.
const opTimeout = 10 * time.Second

// openDevice opens a device of p and closes it when the test ends.
func openDevice(t testing.TB, p Provider) rdma.Device {
	t.Helper()
	d, err := p.Open()
	if errors.Is(err, rdma.ErrNoDevice) {
		t.Skipf("rdmatest: no %s device here: %v", p.Name, err)
	}
	require.NoError(t, err, "open %s device", p.Name)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// pairOpts shape a connected pair.
type pairOpts struct {
	loopback  bool // b on a's device
	sendDepth int
	recvDepth int
	cqDepth   int
	maxInline int
	signalAll bool
	size      int // of local and target regions
}

func (o pairOpts) withDefaults() pairOpts {
	if o.sendDepth == 0 {
		o.sendDepth = 64
	}
	if o.recvDepth == 0 {
		o.recvDepth = 16
	}
	if o.cqDepth == 0 {
		o.cqDepth = 256
	}
	if o.size == 0 {
		o.size = 4096
	}
	return o
}

// pair is two connected QPs: a (the requester in most tests) on devA, b on
// devB (devA too, with loopback). local is a region on devA with local
// write; target is a region on devB with every right, filled with random
// bytes.
type pair struct {
	devA, devB rdma.Device
	cqA, cqB   rdma.CompletionQueue
	a, b       rdma.QueuePair
	local      rdma.MemoryRegion
	target     rdma.MemoryRegion
	extra      []rdma.MemoryRegion // made by extraRegion
}

// extraRegion registers a 4 KiB region of random bytes with access on the
// requester's device (onA) or the target's, and remembers it.
func (x *pair) extraRegion(t testing.TB, onA bool, access rdma.Access) rdma.MemoryRegion {
	t.Helper()
	d := x.devB
	if onA {
		d = x.devA
	}
	mr, err := d.RegisterMemory(4096, access)
	require.NoError(t, err)
	fillRandom(t, mr.Bytes())
	x.extra = append(x.extra, mr)
	return mr
}

func newPair(t testing.TB, p Provider, o pairOpts) *pair {
	t.Helper()
	o = o.withDefaults()
	x := &pair{devA: openDevice(t, p)}
	x.devB = x.devA
	if !o.loopback {
		x.devB = openDevice(t, p)
	}
	var err error
	x.cqA, err = x.devA.CreateCQ(o.cqDepth)
	require.NoError(t, err)
	x.cqB = x.cqA
	if !o.loopback {
		x.cqB, err = x.devB.CreateCQ(o.cqDepth)
		require.NoError(t, err)
	}
	cfg := rdma.QPConfig{SendDepth: o.sendDepth, RecvDepth: o.recvDepth, MaxInline: o.maxInline, SignalAll: o.signalAll}
	cfg.SendCQ, cfg.RecvCQ = x.cqA, x.cqA
	x.a, err = x.devA.CreateQP(cfg)
	require.NoError(t, err)
	cfg.SendCQ, cfg.RecvCQ = x.cqB, x.cqB
	x.b, err = x.devB.CreateQP(cfg)
	require.NoError(t, err)
	connect(t, x.a, x.b)
	x.local, err = x.devA.RegisterMemory(o.size, rdma.AccessLocalWrite)
	require.NoError(t, err)
	x.target, err = x.devB.RegisterMemory(o.size, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	fillRandom(t, x.target.Bytes())
	return x
}

// connect connects a and b both ways, concurrently, as peers do.
func connect(t testing.TB, a, b rdma.QueuePair) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- b.Connect(ctx, a.LocalEndpoint()) }()
	require.NoError(t, a.Connect(ctx, b.LocalEndpoint()))
	require.NoError(t, <-errc)
	require.Equal(t, rdma.QPReadyToSend, a.State())
	require.Equal(t, rdma.QPReadyToSend, b.State())
}

func fillRandom(t testing.TB, b []byte) {
	t.Helper()
	_, err := rand.Read(b)
	require.NoError(t, err)
}

// remote is an rdma.RemoteAddr off bytes into r.
func remote(r rdma.MemoryRegion, off int) rdma.RemoteAddr {
	return rdma.RemoteAddr{Addr: r.Addr() + uint64(off), RKey: r.RKey()}
}

// pollN polls cq until it has n completions or the timeout passes. Safe in
// any goroutine.
func pollN(cq rdma.CompletionQueue, n int, timeout time.Duration) ([]rdma.Completion, error) {
	out := make([]rdma.Completion, 0, n)
	buf := make([]rdma.Completion, 16)
	deadline := time.Now().Add(timeout)
	var idle rdma.Yield
	for len(out) < n {
		k := cq.Poll(buf[:min(len(buf), n-len(out))])
		out = append(out, buf[:k]...)
		if k == 0 && time.Now().After(deadline) {
			return out, fmt.Errorf("rdmatest: %d of %d completions after %v", len(out), n, timeout)
		}
		idle.Idle(k)
	}
	return out, nil
}

// waitN is pollN for the test goroutine.
func waitN(t testing.TB, cq rdma.CompletionQueue, n int) []rdma.Completion {
	t.Helper()
	cs, err := pollN(cq, n, opTimeout)
	require.NoError(t, err)
	return cs
}

// do posts wr signalled on qp and returns its completion.
func do(t testing.TB, qp rdma.QueuePair, cq rdma.CompletionQueue, wr rdma.WorkRequest) rdma.Completion {
	t.Helper()
	wr.Flags |= rdma.FlagSignaled
	require.NoError(t, qp.PostSend(&wr))
	c := waitN(t, cq, 1)[0]
	require.Equal(t, wr.ID, c.ID, "completion of another request: %+v", c)
	require.Equal(t, qp.Num(), c.QPN)
	return c
}

// expectNone polls cq for a while and fails on any completion.
func expectNone(t testing.TB, cq rdma.CompletionQueue, d time.Duration) {
	t.Helper()
	buf := make([]rdma.Completion, 4)
	var idle rdma.Yield
	for end := time.Now().Add(d); time.Now().Before(end); {
		n := cq.Poll(buf)
		require.Zero(t, n, "unexpected completions: %+v", buf[:n])
		idle.Idle(n)
	}
}

// waitState waits until qp reports want.
func waitState(t testing.TB, qp rdma.QueuePair, want rdma.QPState) {
	t.Helper()
	require.Eventually(t, func() bool { return qp.State() == want }, opTimeout, time.Millisecond,
		"QP state %s, want %s", qp.State(), want)
}

func u64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func putU64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
