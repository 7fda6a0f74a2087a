package tcp_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// loopbackPair connects two QPs of one device; confined makes b confined.
func loopbackPair(t *testing.T, d *tcp.Device, confined bool) (a, b rdma.QueuePair, cq rdma.CompletionQueue) {
	t.Helper()
	cq, err := d.CreateCQ(64)
	require.NoError(t, err)
	a, err = d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	b, err = d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 16, RecvDepth: 4, Confined: confined})
	require.NoError(t, err)
	connect(t, &side{Dev: d, CQ: cq, QP: a}, &side{Dev: d, CQ: cq, QP: b})
	return a, b, cq
}

func TestDirect_LoopbackPair_ChecksWhatTheResponderChecks(t *testing.T) {
	d := openDevice(t, tcp.Config{DirectLoopback: true})
	a, _, _ := loopbackPair(t, d, false)
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	ro, err := d.RegisterMemory(4096, rdma.AccessRemoteRead)
	require.NoError(t, err)
	other, err := openDevice(t, tcp.Config{}).RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	foreign, err := d.Register(other.Bytes(), rdma.AccessRemote)
	require.NoError(t, err)
	rdmatest.CheckDirect(t, a.(rdma.DirectMapper), mr, ro, map[string]rdmatest.DirectCase{
		"memory it did not map": {R: rdma.RemoteRegion{Addr: foreign.Addr(), RKey: foreign.RKey(), Len: 8}, Need: rdma.AccessRemoteWrite},
	})
}

// Only an unconfined peer QP of the same device, on a device that allows
// it, is mapped: a confined peer's grants, another device and the default
// config keep the wire.
func TestDirect_OnlyUnconfinedLoopbackOnDirectDevice(t *testing.T) {
	on := tcp.Config{DirectLoopback: true}
	d := openDevice(t, on)
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	r := mr.Remote()
	r.Len = 8

	a, b, _ := loopbackPair(t, d, true)
	_, err = b.Grant(mr, rdma.AccessRemote)
	require.NoError(t, err)
	_, err = a.(rdma.DirectMapper).Direct(r, rdma.AccessRemoteAtomic)
	require.ErrorIs(t, err, rdma.ErrDirect, "confined peer")

	x := newSide(t, openDevice(t, on), 16, rdma.AccessRemote)
	y := newSide(t, d, 16, rdma.AccessRemote)
	connect(t, x, y)
	yr := y.MR.Remote()
	yr.Len = 8
	_, err = x.QP.(rdma.DirectMapper).Direct(yr, rdma.AccessRemoteAtomic)
	require.ErrorIs(t, err, rdma.ErrDirect, "peer on another device")

	off := openDevice(t, tcp.Config{})
	p, _, _ := loopbackPair(t, off, false)
	mo, err := off.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	ro := mo.Remote()
	ro.Len = 8
	_, err = p.(rdma.DirectMapper).Direct(ro, rdma.AccessRemoteAtomic)
	require.ErrorIs(t, err, rdma.ErrDirect, "device without DirectLoopback")

	q := newSide(t, d, 16, rdma.AccessRemote)
	_, err = q.QP.(rdma.DirectMapper).Direct(r, rdma.AccessRemoteAtomic)
	require.ErrorIs(t, err, rdma.ErrQPState, "not connected")
}

// A CPU atomic on the mapping and an atomic through the wire (another QP
// into the same device) act on one word: neither update is lost.
func TestDirect_AtomicsAgreeWithTheWire(t *testing.T) {
	d := openDevice(t, tcp.Config{DirectLoopback: true})
	a, _, _ := loopbackPair(t, d, false)
	home, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	hr := home.Remote()
	dm, err := a.(rdma.DirectMapper).Direct(rdma.RemoteRegion{Addr: hr.Addr, RKey: hr.RKey, Len: 8}, rdma.AccessRemoteAtomic)
	require.NoError(t, err)
	defer dm.Close()
	ctr := word64(dm.Bytes())

	far := newSide(t, openDevice(t, tcp.Config{}), 64, rdma.AccessLocalWrite|rdma.AccessRemote)
	near := newSide(t, d, 64, rdma.AccessLocalWrite|rdma.AccessRemote)
	connect(t, far, near)
	const n = 200
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			wr := rdma.WorkRequest{ID: uint64(i), Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Add: 1,
				Local: rdma.LocalSGE(far.MR, 0, 8), Remote: rdma.RemoteAddr{Addr: hr.Addr, RKey: hr.RKey}}
			if err := far.QP.PostSend(&wr); err != nil {
				done <- err
				return
			}
			if c := wait(t, far.CQ); c.Status != rdma.StatusSuccess {
				done <- assert.AnError
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < n; i++ {
		atomic.AddUint64(ctr, 1)
	}
	require.NoError(t, <-done)
	assert.Equal(t, uint64(2*n), atomic.LoadUint64(ctr))
}

// The mapping outlives the region's Close and the QPs' Close: Live turns
// false, stores never fault, and the memory goes with the mapping's Close.
func TestDirect_OutlivesRegionAndQPClose_LiveTurnsFalse(t *testing.T) {
	d := openDevice(t, tcp.Config{DirectLoopback: true})
	a, b, _ := loopbackPair(t, d, false)
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	rr := mr.Remote()
	dm, err := a.(rdma.DirectMapper).Direct(rr, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	require.True(t, dm.Live())
	require.NoError(t, mr.Close())
	assert.False(t, dm.Live(), "the region is gone")
	dm.Bytes()[0] = 1 // still mapped: no fault
	require.NoError(t, dm.Close())

	mr2, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	dm2, err := a.(rdma.DirectMapper).Direct(mr2.Remote(), rdma.AccessRemoteWrite)
	require.NoError(t, err)
	require.True(t, dm2.Live())
	require.NoError(t, b.Close())
	assert.False(t, dm2.Live(), "the peer closed")
	dm2.Bytes()[8] = 1
	require.NoError(t, dm2.Close())
}
