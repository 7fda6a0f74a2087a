package shm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
)

func TestDirect_ChecksWhatAPostChecks(t *testing.T) {
	d := openTestDevice(t, Config{})
	a, _, _, mr := connectedPair(t, d)
	ro, err := d.RegisterMemory(4096, rdma.AccessRemoteRead)
	require.NoError(t, err)
	rdmatest.CheckDirect(t, a, mr, ro, nil)
}

func TestDirect_ConfinedQP_MapsOnlyGrants(t *testing.T) {
	d := openTestDevice(t, Config{})
	cq, err := d.CreateCQ(64)
	require.NoError(t, err)
	a := newTestQP(t, d, cq)
	bqp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 4, Confined: true})
	require.NoError(t, err)
	b := bqp.(*QP)
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	other, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	_, err = b.Grant(mr, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, a.Connect(ctx5(t), b.LocalEndpoint()))
	require.NoError(t, b.Connect(ctx5(t), a.LocalEndpoint()))
	_, err = a.Direct(rdma.RemoteRegion{Addr: other.Addr(), RKey: other.RKey(), Len: 8}, rdma.AccessRemoteWrite)
	require.ErrorIs(t, err, rdma.ErrDirect, "a region not granted")
	_, err = a.Direct(rdma.RemoteRegion{Addr: mr.Addr(), RKey: mr.RKey(), Len: 8}, rdma.AccessRemoteAtomic)
	require.ErrorIs(t, err, rdma.ErrDirect, "a right not granted")
	dm, err := a.Direct(rdma.RemoteRegion{Addr: mr.Addr(), RKey: mr.RKey(), Len: 8}, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	require.NoError(t, dm.Close())
}

// The mapping outlives what would unmap it for a post: the region's
// withdrawal and the QP's Close. Live says so; stores never fault.
func TestDirect_OutlivesWithdrawalAndClose_LiveTurnsFalse(t *testing.T) {
	d := openTestDevice(t, Config{})
	a, _, _, mr := connectedPair(t, d)
	rr := mr.Remote()
	dm, err := a.Direct(rdma.RemoteRegion{Addr: rr.Addr, RKey: rr.RKey, Len: rr.Len}, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	require.True(t, dm.Live())
	require.NoError(t, mr.Close()) // the peer withdraws it
	require.Eventually(t, func() bool { return !dm.Live() }, 5*time.Second, time.Millisecond)
	dm.Bytes()[0] = 1 // still mapped: no fault
	require.NoError(t, a.Close())
	assert.False(t, dm.Live())
	dm.Bytes()[8] = 1
	require.NoError(t, dm.Close())
}

func TestDirect_NotConnected_ErrQPState(t *testing.T) {
	d := openTestDevice(t, Config{})
	a := newTestQP(t, d, nil)
	_, err := a.Direct(rdma.RemoteRegion{Addr: 4096, RKey: 1, Len: 8}, rdma.AccessRemoteWrite)
	require.ErrorIs(t, err, rdma.ErrQPState)
}
