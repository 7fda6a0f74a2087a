package publisher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// The home's own fence queue pair reaches the counter (its peer is granted
// the counter word, atomics only), so a home that loses its lease fences
// it; and nothing else of the home: a WRITE to the counter or the journal
// through it is refused. (It failed with a remote access error since queue
// pairs were confined, and the home only logged that it could not fence.)
func TestPublisher_FenceQP_ReachesTheCounterWordOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "fence"})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	p, err := New(ctx, node, devs, Config{Topic: "fence", Idle: rdma.Yield{}, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	require.Eventually(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.home != nil }, 10*time.Second, time.Millisecond)
	p.mu.Lock()
	h, f, fd := p.home, p.fence, p.fenceDesc
	p.mu.Unlock()

	before := h.Counter()
	got, err := ring.FenceCounter(p.dev, f.qp, f.cq, fd, 2*time.Second)
	require.NoError(t, err, "the fence's fetch-and-add on the counter")
	assert.Equal(t, before, got)
	assert.Equal(t, before+ring.FenceAdd, h.Counter())

	mr, err := p.dev.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	defer mr.Close()
	journal := fd.Region.Addr + fd.Region.Len - 64
	wr := rdma.WorkRequest{ID: 42, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(mr, 0, 8),
		Remote: rdma.RemoteAddr{Addr: journal, RKey: fd.Region.RKey}}
	require.NoError(t, f.qp.PostSend(&wr))
	var c [1]rdma.Completion
	require.Eventually(t, func() bool { return f.cq.Poll(c[:]) == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, uint64(42), c[0].ID)
	assert.Equal(t, rdma.StatusRemoteAccess, c[0].Status, "a WRITE into the home's journal through the fence QP")
	assert.Equal(t, before+ring.FenceAdd, h.Counter())
}

// A home of ours lost (its counter fenced) while a failover connected a
// writer to it gets no writer: switchHome refuses it, the writer in place
// stays fenced, and the failover looks again. (Under load the bus gave the
// home up while the publisher was moving to it, the new writer got the
// home's reservation as its limit, and with a reliable subscriber keeping
// up its publish waited out the timeout: "no room".)
func TestPublisher_HomeLostWhileSwitching_NoWriterOnIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := bus.Open(ctx, bus.Config{NodeID: "lostsw", LeaseTTL: 10 * time.Second})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	p, err := New(ctx, node, devs, Config{Topic: "lostsw", Idle: rdma.Yield{}, Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	seq, err := p.Publish(1, []byte("x"), time.Now().UnixNano())
	require.NoError(t, err)
	require.Equal(t, uint64(1), seq)
	hi, err := p.pub.Rehome(ctx) // what a failover finds: our home, its lease still held
	require.NoError(t, err)
	require.True(t, hi.Local)
	epoch, w := p.Epoch(), p.writer()
	require.Equal(t, epoch, hi.Epoch)

	p.onHomeLost(hi, errors.New("test: lease not renewed")) // what the bus says when it gives the home up
	require.GreaterOrEqual(t, p.home.Counter(), uint64(ring.FenceAdd), "the lost home's counter is fenced")
	require.Zero(t, w.Limit())
	assert.Zero(t, p.homeCounter(), "the bus reserves from this: a fenced counter reserves nothing")

	err = p.switchHome(ctx, hi, 2*time.Second) // the failover that was connecting meanwhile
	require.ErrorIs(t, err, ring.ErrFenced)
	assert.Same(t, w, p.writer(), "no writer moved onto the lost home")
	assert.Zero(t, p.writer().Limit())
	assert.Equal(t, epoch, p.Epoch())
}
