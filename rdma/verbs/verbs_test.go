//go:build verbs && cgo && linux

package verbs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/verbs"
)

// openOrSkip opens the first RDMA device, or skips: this machine class has
// no RDMA NIC and no InfiniBand support in its kernel.
func openOrSkip(t testing.TB) rdma.Device {
	t.Helper()
	d, err := verbs.Open(verbs.Config{HostID: "verbs-test"})
	if errors.Is(err, rdma.ErrNoDevice) {
		t.Skipf("skipping: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpen_RefusesBadConfigBeforeTouchingTheDevice(t *testing.T) {
	_, err := verbs.Open(verbs.Config{Port: 300})
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
	_, err = verbs.Open(verbs.Config{GIDIndex: -1})
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
}

func TestDevice_ReportsAtomicCaps(t *testing.T) {
	d := openOrSkip(t)
	require.Equal(t, rdma.ProviderVerbs, d.Provider())
	t.Logf("atomic cap %d, max inline %d", d.Caps().Atomic, d.Caps().MaxInline)
}

// A grant is a type 2 memory window: its rkey is not the region's, and a
// device without type 2B windows says so instead of confining nothing.
func TestGrant_IsAMemoryWindowOfItsOwn(t *testing.T) {
	d := openOrSkip(t)
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 1})
	require.NoError(t, err)
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	rr, err := qp.GrantRange(mr, 64, 8, rdma.AccessRemoteWrite)
	if !d.Caps().GrantPerQP {
		require.ErrorIs(t, err, rdma.ErrNotSupported)
		t.Skipf("skipping: %s has no type 2B memory windows: %v", d.HostID(), err)
	}
	require.NoError(t, err)
	require.NotEqual(t, mr.RKey(), rr.RKey, "a window's rkey, not the region's")
	require.Equal(t, rdma.RemoteRegion{Addr: mr.Addr() + 64, RKey: rr.RKey, Len: 8}, rr)
	require.NoError(t, qp.Close())
	require.NoError(t, mr.Close())
}
