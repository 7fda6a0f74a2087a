package rdmatest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var grantTests = []test{
	{"QPCannotTouchRegionGrantedToAnother", testGrantOtherQP},
	{"ReadOnlyGrant_WriteAndAtomicRefused", testGrantReadOnly},
	{"RegionRegisteredLater_NotGrantedNotReachable", testGrantLaterRegion},
	{"WrongRKey_ClosesTheQueuePair", testWrongRKeyCloses},
	{"Grant_BadArguments_Refused", testGrantBad},
}

// granted is two connected QPs (a on devA, b on devB) where b's peer may
// reach only what b was granted before it connected.
type granted struct {
	a, b     rdma.QueuePair
	cqA, cqB rdma.CompletionQueue
	local    rdma.MemoryRegion
}

// grantedPair connects a new QP of devA to a new QP of devB that was first
// granted each region in grants with its access.
func grantedPair(t *testing.T, devA, devB rdma.Device, grants map[rdma.MemoryRegion]rdma.Access) *granted {
	t.Helper()
	g := &granted{}
	var err error
	g.cqA, err = devA.CreateCQ(64)
	require.NoError(t, err)
	g.cqB, err = devB.CreateCQ(64)
	require.NoError(t, err)
	g.a, err = devA.CreateQP(rdma.QPConfig{SendCQ: g.cqA, RecvCQ: g.cqA, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	g.b, err = devB.CreateQP(rdma.QPConfig{SendCQ: g.cqB, RecvCQ: g.cqB, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	for mr, acc := range grants {
		rr, err := g.b.Grant(mr, acc)
		require.NoError(t, err)
		assert.Equal(t, uint64(len(mr.Bytes())), rr.Len)
	}
	connect(t, g.a, g.b)
	g.local, err = devA.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	fillRandom(t, g.local.Bytes())
	return g
}

func writeTo(g *granted, mr rdma.MemoryRegion) rdma.WorkRequest {
	return rdma.WorkRequest{ID: 5, Op: rdma.OpWrite, Local: rdma.LocalSGE(g.local, 0, 64), Remote: remote(mr, 0)}
}

func targetRegion(t *testing.T, d rdma.Device, access rdma.Access) rdma.MemoryRegion {
	t.Helper()
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|access)
	require.NoError(t, err)
	fillRandom(t, mr.Bytes())
	return mr
}

// Two QPs of one device, each granted its own region: each peer reaches its
// own, and the other's rkey fails (the memory untouched) for every op.
func testGrantOtherQP(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r1, r2 := targetRegion(t, devB, rdma.AccessRemote), targetRegion(t, devB, rdma.AccessRemote)
	g1 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemote})
	assert.Equal(t, rdma.StatusSuccess, do(t, g1.a, g1.cqA, writeTo(g1, r1)).Status, "own grant")
	assert.Equal(t, g1.local.Bytes()[:64], r1.Bytes()[:64])
	for _, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpRead, rdma.OpFetchAndAdd, rdma.OpCompareAndSwap} {
		t.Run(op.String(), func(t *testing.T) {
			g2 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r2: rdma.AccessRemote})
			before := bytes.Clone(r1.Bytes())
			wr := rdma.WorkRequest{ID: 9, Op: op, Local: rdma.LocalSGE(g2.local, 0, 8), Remote: remote(r1, 0), Add: 1, Compare: u64(r1.Bytes()), Swap: 7}
			c := do(t, g2.a, g2.cqA, wr)
			assert.Equal(t, rdma.StatusRemoteAccess, c.Status, "%s on a region granted to another QP", op)
			assert.Equal(t, before, r1.Bytes(), "memory of another QP's grant changed")
			waitState(t, g2.a, rdma.QPError)
		})
	}
}

// A read-only grant of a region that allows everything: reads work,
// writes and atomics fail and change nothing.
func testGrantReadOnly(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r := targetRegion(t, devB, rdma.AccessRemote)
	for _, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpFetchAndAdd} {
		t.Run(op.String(), func(t *testing.T) {
			g := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r: rdma.AccessRemoteRead})
			rd := rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: rdma.LocalSGE(g.local, 0, 64), Remote: remote(r, 0)}
			require.Equal(t, rdma.StatusSuccess, do(t, g.a, g.cqA, rd).Status)
			assert.Equal(t, r.Bytes()[:64], g.local.Bytes()[:64])
			before := bytes.Clone(r.Bytes())
			wr := rdma.WorkRequest{ID: 2, Op: op, Local: rdma.LocalSGE(g.local, 0, 8), Remote: remote(r, 64), Add: 1}
			assert.Equal(t, rdma.StatusRemoteAccess, do(t, g.a, g.cqA, wr).Status, "%s through a read-only grant", op)
			assert.Equal(t, before, r.Bytes())
		})
	}
}

// A region registered after a confined QP connected is not reachable
// through it until it is granted; then it is.
func testGrantLaterRegion(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r1 := targetRegion(t, devB, rdma.AccessRemote)
	g := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemoteWrite})
	late := targetRegion(t, devB, rdma.AccessRemote)
	before := bytes.Clone(late.Bytes())
	g2 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemoteWrite})
	assert.Equal(t, rdma.StatusRemoteAccess, do(t, g2.a, g2.cqA, writeTo(g2, late)).Status, "a region granted to nobody")
	assert.Equal(t, before, late.Bytes())
	_, err := g.b.Grant(late, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	assert.Equal(t, rdma.StatusSuccess, do(t, g.a, g.cqA, writeTo(g, late)).Status, "granted after connect")
	assert.Equal(t, g.local.Bytes()[:64], late.Bytes()[:64])
}

// A request naming an rkey the peer may not use fails, and the queue pair
// it reached goes to ERR too: the connection is closed, so a peer cannot
// keep guessing on it.
func testWrongRKeyCloses(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	ok := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 0)}
	require.Equal(t, rdma.StatusSuccess, do(t, x.a, x.cqA, ok).Status)
	bad := ok
	bad.ID, bad.Remote.RKey = 2, x.target.RKey()^0x5a5a5a5a
	assert.Equal(t, rdma.StatusRemoteAccess, do(t, x.a, x.cqA, bad).Status)
	waitState(t, x.a, rdma.QPError)
	waitState(t, x.b, rdma.QPError)
}

func testGrantBad(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	cq, err := devB.CreateCQ(8)
	require.NoError(t, err)
	qp, err := devB.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4})
	require.NoError(t, err)
	other := targetRegion(t, devA, rdma.AccessRemote)
	ro := targetRegion(t, devB, rdma.AccessRemoteRead)
	for name, c := range map[string]struct {
		mr  rdma.MemoryRegion
		acc rdma.Access
	}{
		"another device": {other, rdma.AccessRemoteRead},
		"local right":    {ro, rdma.AccessLocalWrite},
		"none":           {ro, 0},
		"beyond region":  {ro, rdma.AccessRemoteWrite},
	} {
		_, err := qp.Grant(c.mr, c.acc)
		assert.ErrorIs(t, err, rdma.ErrGrant, name)
	}
	require.NoError(t, ro.Close())
	_, err = qp.Grant(ro, rdma.AccessRemoteRead)
	assert.ErrorIs(t, err, rdma.ErrGrant, "closed region")
}
