package link

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

func TestAlsoOn_Get_RegistersOncePerProviderAndCloseReleases(t *testing.T) {
	devs := NewDevices(DevicesConfig{HostID: "h"})
	defer devs.Close()
	shm, err := devs.Get(rdma.ProviderShm)
	require.NoError(t, err)
	r, err := ring.NewRing(shm, ring.RingConfig{Slots: 16, SlotSize: 128})
	require.NoError(t, err)
	defer r.Close()

	var a AlsoOn
	calls := 0
	reg := func(dev rdma.Device) ([]byte, rdma.MemoryRegion, error) {
		calls++
		return Marshalled(r.RegisterOn)(dev)
	}
	got, created, err := a.Get(devs, rdma.ProviderTCP, reg)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, rdma.ProviderTCP, got.Device.Provider())
	var d ring.RingDesc
	require.NoError(t, d.UnmarshalBinary(got.Desc))
	assert.Equal(t, got.MR.Remote().RKey, d.Region.RKey, "the descriptor names the region on the second device")
	again, created, err := a.Get(devs, rdma.ProviderTCP, reg)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, got.Desc, again.Desc)
	assert.Equal(t, 1, calls, "registered once")

	_, _, err = a.Get(devs, "carrier-pigeon", reg)
	assert.ErrorIs(t, err, ErrUnsupported)
	boom := errors.New("boom")
	_, _, err = a.Get(devs, rdma.ProviderShm, func(rdma.Device) ([]byte, rdma.MemoryRegion, error) { return nil, nil, boom })
	assert.ErrorIs(t, err, boom)
	_, created, err = a.Get(devs, rdma.ProviderShm, reg)
	require.NoError(t, err)
	assert.True(t, created, "a failed registration is not kept")

	closes := a.Forget()
	assert.Len(t, closes, 2, "tcp and shm")
	_, created, err = a.Get(devs, rdma.ProviderTCP, reg)
	require.NoError(t, err)
	assert.True(t, created, "after Forget a Get registers afresh")
	for _, c := range closes {
		assert.NoError(t, c(), "the forgotten regions are the caller's to close")
	}

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "idempotent")
	_, _, err = a.Get(devs, rdma.ProviderTCP, reg)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestOpen_MakesASizedPairAndRefusesABadProfile(t *testing.T) {
	devs := NewDevices(DevicesConfig{HostID: "h"})
	defer devs.Close()
	dev, err := devs.Get(rdma.ProviderShm)
	require.NoError(t, err)
	for _, p := range []Profile{Writer, Responder, Query} {
		c, err := Open(dev, p)
		require.NoError(t, err)
		assert.NotNil(t, c.QP)
		require.NoError(t, c.Close())
	}
	_, err = Open(dev, Profile{SendDepth: 0, RecvDepth: 1, CQDepth: 1})
	assert.ErrorIs(t, err, ErrInvalidProfile)
	assert.NoError(t, Conn{}.Close(), "the zero Conn closes nothing")
}

// A tcp writer's send queue is deeper than the profile's, within its CQ:
// posts beyond Writer.SendDepth are taken until the CQ's depth.
func TestOpen_TCPWriter_DeeperSendQueue(t *testing.T) {
	devs := NewDevices(DevicesConfig{HostID: "h"})
	defer devs.Close()
	dev, err := devs.Get(rdma.ProviderTCP)
	require.NoError(t, err)
	p := Profile{SendDepth: 4, RecvDepth: 4, CQDepth: 16}
	a, err := Open(dev, p)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(dev, p)
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.QP.Connect(ctx, b.QP.LocalEndpoint()))
	require.NoError(t, b.QP.Connect(ctx, a.QP.LocalEndpoint()))
	mr, err := dev.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	require.NoError(t, err)
	defer mr.Close()
	posted := 0
	for ; posted < 64; posted++ {
		wr := rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(mr, 0, 8), Remote: rdma.RemoteAddr{Addr: mr.Addr() + 8, RKey: mr.RKey()}}
		if err := a.QP.PostSend(&wr); err != nil {
			require.ErrorIs(t, err, rdma.ErrSendQueueFull)
			break
		}
	}
	assert.Equal(t, 16, posted, "the CQ's depth, not the profile's 4 (nor 32×4)")
}

// A publisher's tcp queue pair to a ring queues as many requests as its CQ
// holds (8192), not 2048: a queue that runs dry within an acknowledgement's
// round trip stops the stream with it (tcpSendScale).
func TestTCPSendDepth_WriterAsDeepAsItsCQ(t *testing.T) {
	assert.Equal(t, Writer.CQDepth, tcpSendDepth(Writer, 1<<16))
	assert.Equal(t, 1024, tcpSendDepth(Writer, 1024), "within the device's limit")
	assert.Equal(t, Responder.CQDepth, tcpSendDepth(Responder, 1<<16))
}

func TestBackoff_DoublesUpToMaxAndBoundsAttempts(t *testing.T) {
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond},
		[]time.Duration{Connect.Delay(1), Connect.Delay(2), Connect.Delay(3), Connect.Delay(4), Connect.Delay(5)})
	assert.True(t, Connect.More(5))
	assert.False(t, Connect.More(6))
	assert.Equal(t, 2*time.Second, Reconnect.Delay(50))
	assert.True(t, Reconnect.More(1000), "until the caller stops")
}

// The tcp device link opens maps an unconfined loopback peer's memory
// (tcp.Config.DirectLoopback): a publisher's claims on its own home are CPU
// atomics, and ring.Writer takes that path (ring/direct.go).
func TestDevices_TCP_LoopbackPairMapsDirect(t *testing.T) {
	devs := NewDevices(DevicesConfig{HostID: "h"})
	defer devs.Close()
	dev, err := devs.Get(rdma.ProviderTCP)
	require.NoError(t, err)
	w, err := OpenConfined(dev, Writer)
	require.NoError(t, err)
	defer w.Close()
	home, err := Open(dev, Writer)
	require.NoError(t, err)
	defer home.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.QP.Connect(ctx, home.QP.LocalEndpoint()))
	require.NoError(t, home.QP.Connect(ctx, w.QP.LocalEndpoint()))
	mr, err := dev.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	defer mr.Close()
	dmr, ok := w.QP.(rdma.DirectMapper)
	require.True(t, ok)
	dm, err := dmr.Direct(rdma.RemoteRegion{Addr: mr.Addr(), RKey: mr.RKey(), Len: 8}, rdma.AccessRemoteAtomic)
	require.NoError(t, err)
	assert.True(t, dm.Live())
	require.NoError(t, dm.Close())
}
