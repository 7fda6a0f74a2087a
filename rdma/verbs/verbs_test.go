//go:build verbs && cgo && linux

package verbs_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

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

// Where type 2B windows confine QPs, a region is registered grant-only: on
// a QP granted a window of it, the region's own rkey (what a descriptor
// sniffed off the control plane carries) fails even inside the window,
// the window's rkey works, and on a second QP, granted a window of the
// same region too, the first window's rkey fails. The memory is untouched
// by every refused op.
func TestGrantOnly_RegionKeyReachesNothingAWindowItsQPOnly(t *testing.T) {
	d := openOrSkip(t)
	if !d.Caps().GrantPerQP {
		t.Skip("skipping: no type 2B memory windows on this device; every QP reaches every region (SECURITY.md)")
	}
	require.True(t, d.Caps().GrantOnly, "a device with type 2B windows registers grant-only by default")
	target, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	type side struct {
		a, b rdma.QueuePair
		cq   rdma.CompletionQueue
		rr   rdma.RemoteRegion
	}
	open := func() side {
		cq, err := d.CreateCQ(64)
		require.NoError(t, err)
		a, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 1})
		require.NoError(t, err)
		b, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 1, Confined: true})
		require.NoError(t, err)
		rr, err := b.Grant(target, rdma.AccessRemoteWrite)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errc := make(chan error, 1)
		go func() { errc <- b.Connect(ctx, a.LocalEndpoint()) }()
		require.NoError(t, a.Connect(ctx, b.LocalEndpoint()))
		require.NoError(t, <-errc)
		return side{a: a, b: b, cq: cq, rr: rr}
	}
	local, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	copy(local.Bytes(), "granted")
	write := func(s side, rkey uint32) rdma.Status {
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 8),
			Remote: rdma.RemoteAddr{Addr: target.Addr() + 64, RKey: rkey}}
		require.NoError(t, s.a.PostSend(&wr))
		buf := make([]rdma.Completion, 1)
		deadline := time.Now().Add(10 * time.Second)
		for s.cq.Poll(buf) == 0 {
			require.True(t, time.Now().Before(deadline), "no completion")
			runtime.Gosched()
		}
		return buf[0].Status
	}
	s1 := open()
	require.NotEqual(t, target.RKey(), s1.rr.RKey)
	require.Equal(t, rdma.StatusSuccess, write(s1, s1.rr.RKey), "the window's rkey on its QP")
	require.Equal(t, []byte("granted\x00"), target.Bytes()[64:72])
	clear(target.Bytes())
	s2 := open()
	require.Equal(t, rdma.StatusRemoteAccess, write(s2, s1.rr.RKey), "another QP's window")
	s3 := open()
	require.Equal(t, rdma.StatusRemoteAccess, write(s3, target.RKey()), "the region's own rkey, inside the window")
	require.Equal(t, make([]byte, 4096), target.Bytes(), "refused ops changed nothing")
}
