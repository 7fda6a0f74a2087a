package rdmatest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var regionTests = []test{
	{"RegisteredAfterConnect_Reachable", testRegionAfterConnect},
	{"Deregistered_RemoteAccessError", testRegionDeregistered},
	{"LocalDeregistered_LocalProtection", testLocalDeregistered},
	{"ManyRegions_EachByItsKey", testManyRegions},
}

func testRegionAfterConnect(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	late, err := x.devB.RegisterMemory(3*4096, rdma.AccessRemote)
	require.NoError(t, err)
	copy(x.local.Bytes(), "late region")
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 11), Remote: remote(late, 2*4096+5)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, "late region", string(late.Bytes()[2*4096+5:2*4096+16]))
	// And the requester's side registers late too: a READ into it.
	lateLocal, err := x.devA.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	c = do(t, x.a, x.cqA, rdma.WorkRequest{ID: 2, Op: rdma.OpRead, Local: rdma.LocalSGE(lateLocal, 0, 11), Remote: remote(late, 2*4096+5)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, "late region", string(lateLocal.Bytes()[:11]))
}

func testRegionDeregistered(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	gone, err := x.devB.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	rr := gone.Remote()
	require.Equal(t, rdma.StatusSuccess, do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte("x"), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}}).Status)
	require.NoError(t, gone.Close())
	require.NoError(t, gone.Close(), "second Close")
	before := bytes.Clone(x.target.Bytes())
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 2, Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte("y"), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}})
	assert.Equal(t, rdma.StatusRemoteAccess, c.Status)
	assert.Equal(t, before, x.target.Bytes())
}

func testLocalDeregistered(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	buf, err := x.devA.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	sge := rdma.LocalSGE(buf, 0, 8)
	require.NoError(t, buf.Close())
	before := bytes.Clone(x.target.Bytes())
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: sge, Remote: remote(x.target, 0)})
	assert.Equal(t, rdma.StatusLocalProtection, c.Status)
	assert.Equal(t, before, x.target.Bytes())
}

func testManyRegions(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	var mrs []rdma.MemoryRegion
	for range 16 {
		mr, err := x.devB.RegisterMemory(4096, rdma.AccessRemoteWrite)
		require.NoError(t, err)
		mrs = append(mrs, mr)
	}
	for i, mr := range mrs {
		c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte{byte(i + 1)}, Remote: remote(mr, i)})
		require.Equal(t, rdma.StatusSuccess, c.Status)
	}
	for i, mr := range mrs {
		want := make([]byte, 4096)
		want[i] = byte(i + 1)
		assert.Equal(t, want, mr.Bytes(), "region %d", i)
	}
}
