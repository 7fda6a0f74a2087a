package rdmatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// DirectCase is a region a DirectMapper must refuse, for the access asked.
type DirectCase struct {
	R    rdma.RemoteRegion
	Need rdma.Access
}

// CheckDirect checks what every rdma.DirectMapper must: it refuses
// (rdma.ErrDirect) what a post would refuse -- an unknown rkey, a range
// outside the region, an empty or huge one, no or local rights, an
// unaligned atomic, a write on a read-only region (ro), and the provider's
// own extra cases -- and maps a valid range of mr (4096 bytes, remote
// rights) as that same memory, Close idempotent.
func CheckDirect(t *testing.T, dmr rdma.DirectMapper, mr, ro rdma.MemoryRegion, extra map[string]DirectCase) {
	t.Helper()
	rr := mr.Remote()
	cases := map[string]DirectCase{
		"unknown rkey":      {rdma.RemoteRegion{Addr: rr.Addr, RKey: rr.RKey + 12345, Len: 8}, rdma.AccessRemoteWrite},
		"past the end":      {rdma.RemoteRegion{Addr: rr.Addr + 4090, RKey: rr.RKey, Len: 8}, rdma.AccessRemoteWrite},
		"before the start":  {rdma.RemoteRegion{Addr: rr.Addr - 8, RKey: rr.RKey, Len: 16}, rdma.AccessRemoteWrite},
		"huge length":       {rdma.RemoteRegion{Addr: rr.Addr + 8, RKey: rr.RKey, Len: ^uint64(0)}, rdma.AccessRemoteWrite},
		"empty":             {rdma.RemoteRegion{Addr: rr.Addr, RKey: rr.RKey, Len: 0}, rdma.AccessRemoteWrite},
		"no rights asked":   {rdma.RemoteRegion{Addr: rr.Addr, RKey: rr.RKey, Len: 8}, 0},
		"local right":       {rdma.RemoteRegion{Addr: rr.Addr, RKey: rr.RKey, Len: 8}, rdma.AccessLocalWrite},
		"unaligned atomic":  {rdma.RemoteRegion{Addr: rr.Addr + 4, RKey: rr.RKey, Len: 8}, rdma.AccessRemoteAtomic},
		"write on readonly": {rdma.RemoteRegion{Addr: ro.Addr(), RKey: ro.RKey(), Len: 8}, rdma.AccessRemoteWrite},
	}
	for name, c := range extra {
		cases[name] = c
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dm, err := dmr.Direct(c.R, c.Need)
			require.ErrorIs(t, err, rdma.ErrDirect)
			assert.Nil(t, dm)
		})
	}
	dm, err := dmr.Direct(rdma.RemoteRegion{Addr: rr.Addr + 64, RKey: rr.RKey, Len: 64}, rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic)
	require.NoError(t, err)
	require.Len(t, dm.Bytes(), 64)
	copy(dm.Bytes(), "direct")
	assert.Equal(t, "direct", string(mr.Bytes()[64:70]), "the same memory as the region")
	assert.True(t, dm.Live())
	require.NoError(t, dm.Close())
	require.NoError(t, dm.Close(), "idempotent")
}
