package shm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

func openTestDevice(t *testing.T, cfg Config) *Device {
	t.Helper()
	d, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newTestQP(t *testing.T, d *Device, cq rdma.CompletionQueue) *QP {
	t.Helper()
	if cq == nil {
		var err error
		cq, err = d.CreateCQ(64)
		require.NoError(t, err)
	}
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 4})
	require.NoError(t, err)
	return qp.(*QP)
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func rawDial(t *testing.T, addr string) *ctlConn {
	t.Helper()
	nc, err := net.Dial("unixpacket", addr)
	require.NoError(t, err)
	c := newCtlConn(nc.(*net.UnixConn))
	t.Cleanup(c.close)
	return c
}

// expectClosed waits for the other end to close c.
func expectClosed(t *testing.T, c *ctlConn) {
	t.Helper()
	for {
		f, fd, err := c.recv(time.Now().Add(5 * time.Second))
		closeFD(fd)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open after 5s")
			}
			return
		}
		_ = f
	}
}

// connectedPair returns two connected QPs on d and a region to write to.
func connectedPair(t *testing.T, d *Device) (*QP, *QP, rdma.CompletionQueue, rdma.MemoryRegion) {
	t.Helper()
	cq, err := d.CreateCQ(64)
	require.NoError(t, err)
	a, b := newTestQP(t, d, cq), newTestQP(t, d, cq)
	require.NoError(t, a.Connect(ctx5(t), b.LocalEndpoint()))
	require.NoError(t, b.Connect(ctx5(t), a.LocalEndpoint()))
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	return a, b, cq, mr
}

func writeOK(t *testing.T, qp *QP, cq rdma.CompletionQueue, mr rdma.MemoryRegion) {
	t.Helper()
	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("ok"), Remote: rdma.RemoteAddr{Addr: mr.Addr(), RKey: mr.RKey()}}
	require.NoError(t, qp.PostSend(&wr))
	buf := make([]rdma.Completion, 1)
	require.Eventually(t, func() bool { return cq.Poll(buf) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, rdma.StatusSuccess, buf[0].Status)
	require.Equal(t, "ok", string(mr.Bytes()[:2]))
}

func TestServe_GarbagePeer_ConnectionClosed_NothingElseChanges(t *testing.T) {
	d := openTestDevice(t, Config{})
	a, _, cq, mr := connectedPair(t, d)
	for name, pkt := range map[string][]byte{
		"text":          []byte("GET / HTTP/1.1\r\n\r\n"),
		"empty":         {},
		"bad version":   {9, 1, 0, 0},
		"ack first":     (&frame{typ: frameAck, acked: frameRegionAdd, rkey: 1}).appendBinary(nil),
		"oversized":     make([]byte, 4096),
		"welcome first": (&frame{typ: frameReady}).appendBinary(nil),
	} {
		c := rawDial(t, d.Addr())
		_, _, err := c.c.WriteMsgUnix(pkt, nil, nil)
		require.NoError(t, err, name)
		expectClosed(t, c)
	}
	assert.Equal(t, rdma.QPReadyToSend, a.State())
	writeOK(t, a, cq, mr)
}

func TestServe_HelloWithFD_Closed(t *testing.T) {
	d := openTestDevice(t, Config{})
	q := newTestQP(t, d, nil)
	c := rawDial(t, d.Addr())
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	h := frame{typ: frameHello, dstQPN: q.num, dstNonce: q.nonce, srcQPN: 1, srcNonce: 1}
	require.NoError(t, c.send(h, p[0], time.Second))
	expectClosed(t, c)
	assert.Equal(t, rdma.QPReset, q.State(), "a bad hello binds nothing")
}

func TestServe_HelloForUnknownQP_Refused(t *testing.T) {
	d := openTestDevice(t, Config{})
	q := newTestQP(t, d, nil)
	for name, h := range map[string]frame{
		"wrong nonce": {typ: frameHello, dstQPN: q.num, dstNonce: q.nonce + 1, srcQPN: 1},
		"no such QPN": {typ: frameHello, dstQPN: q.num + 100, dstNonce: q.nonce, srcQPN: 1},
	} {
		c := rawDial(t, d.Addr())
		require.NoError(t, c.send(h, -1, time.Second))
		f, fd, err := c.recv(time.Now().Add(5 * time.Second))
		require.NoError(t, err, name)
		assert.Equal(t, -1, fd)
		assert.Equal(t, frameRefuse, f.typ, name)
		assert.Equal(t, refuseUnknownQP, f.reason, name)
	}
}

func TestServe_GarbageAfterHello_PeerQPErrors_OthersFine(t *testing.T) {
	d := openTestDevice(t, Config{})
	a, _, cq, mr := connectedPair(t, d)
	victim := newTestQP(t, d, nil)
	c := rawDial(t, d.Addr())
	require.NoError(t, c.send(frame{typ: frameHello, dstQPN: victim.num, dstNonce: victim.nonce, srcQPN: 1}, -1, time.Second))
	for {
		f, fd, err := c.recv(time.Now().Add(5 * time.Second))
		require.NoError(t, err)
		closeFD(fd)
		if f.typ == frameReady {
			break
		}
	}
	_, _, err := c.c.WriteMsgUnix([]byte("garbage"), nil, nil)
	require.NoError(t, err)
	expectClosed(t, c)
	require.Eventually(t, func() bool { return victim.State() == rdma.QPError }, 5*time.Second, time.Millisecond)
	writeOK(t, a, cq, mr)
}

func TestConnect_Refusals(t *testing.T) {
	d := openTestDevice(t, Config{})
	a, b, _, _ := connectedPair(t, d)
	_ = a
	t.Run("OtherHost_StaysInReset", func(t *testing.T) {
		q := newTestQP(t, d, nil)
		ep := b.LocalEndpoint()
		ep.HostID = "elsewhere"
		assert.ErrorIs(t, q.Connect(ctx5(t), ep), ErrOtherHost)
		assert.Equal(t, rdma.QPReset, q.State())
	})
	t.Run("NoSuchSocket_PeerNotFound_ERR", func(t *testing.T) {
		q := newTestQP(t, d, nil)
		ep := b.LocalEndpoint()
		ep.Addr = "@tickbus-shm-nobody-listens"
		assert.ErrorIs(t, q.Connect(ctx5(t), ep), rdma.ErrPeerNotFound)
		assert.Equal(t, rdma.QPError, q.State())
	})
	t.Run("StaleNonce_Refused", func(t *testing.T) {
		q := newTestQP(t, d, nil)
		ep := newTestQP(t, d, nil).LocalEndpoint()
		ep.Nonce++
		assert.ErrorIs(t, q.Connect(ctx5(t), ep), rdma.ErrPeerRefused)
		assert.Equal(t, rdma.QPError, q.State())
	})
	t.Run("SecondPeer_Refused", func(t *testing.T) {
		q := newTestQP(t, d, nil)
		assert.ErrorIs(t, q.Connect(ctx5(t), b.LocalEndpoint()), rdma.ErrPeerRefused, "b is a's already")
	})
	t.Run("ClosedPeer_Refused", func(t *testing.T) {
		q, gone := newTestQP(t, d, nil), newTestQP(t, d, nil)
		ep := gone.LocalEndpoint()
		require.NoError(t, gone.Close())
		assert.ErrorIs(t, q.Connect(ctx5(t), ep), rdma.ErrPeerRefused)
	})
	t.Run("ContextCancelled", func(t *testing.T) {
		q := newTestQP(t, d, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.Error(t, q.Connect(ctx, newTestQP(t, d, nil).LocalEndpoint()))
		assert.Equal(t, rdma.QPError, q.State())
	})
}

// fakeAcceptor listens like a device and plays script on the first
// connection; it returns an endpoint naming it.
func fakeAcceptor(t *testing.T, d *Device, script func(c *ctlConn)) rdma.Endpoint {
	t.Helper()
	addr := fmt.Sprintf("@tickbus-shm-test-%x", random64())
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		uc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		c := newCtlConn(uc)
		defer c.close()
		if _, _, err := c.recv(time.Now().Add(5 * time.Second)); err != nil {
			return
		}
		script(c)
		// Hold the connection until the requester gives up.
		_, _, _ = c.recv(time.Now().Add(5 * time.Second))
	}()
	return rdma.Endpoint{Provider: rdma.ProviderShm, HostID: d.HostID(), QPN: 1, Nonce: 1, Addr: addr}
}

// goodQueue makes a valid receive queue memfd and its welcome.
func goodQueue(t *testing.T) (*shmem.Mapping, frame) {
	m, err := shmem.Alloc("test-q", queueBytes(4, 64))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	newQueueView(m.Bytes(), 4, 64).initHeader()
	return m, frame{typ: frameWelcome, qCap: 4, qMaxSend: 64, qSlot: slotSize(64), qSize: uint64(len(m.Bytes()))}
}

func TestConnect_LyingAcceptor_ErrorsAndNothingMapped(t *testing.T) {
	d := openTestDevice(t, Config{})
	pipe := func(t *testing.T) int {
		var p [2]int
		require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
		t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
		return p[0]
	}
	region := func(t *testing.T, size int) *shmem.Mapping {
		m, err := shmem.Alloc("test-r", size)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	cases := map[string]func(t *testing.T, c *ctlConn){
		"welcome with a pipe": func(t *testing.T, c *ctlConn) {
			_, w := goodQueue(t)
			_ = c.send(w, pipe(t), time.Second)
		},
		"welcome with a small memfd": func(t *testing.T, c *ctlConn) {
			_, w := goodQueue(t)
			_ = c.send(w, region(t, 4096).Fd(), time.Second)
		},
		"welcome with a bad header": func(t *testing.T, c *ctlConn) {
			m, w := goodQueue(t)
			m.Bytes()[0] ^= 1
			_ = c.send(w, m.Fd(), time.Second)
		},
		"region before welcome": func(t *testing.T, c *ctlConn) {
			m := region(t, 4096)
			_ = c.send(frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 1, addr: m.Addr(), length: 4096}, m.Fd(), time.Second)
		},
		"region past its memfd": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m := region(t, 4096)
			_ = c.send(frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 1, addr: m.Addr(), length: 8192}, m.Fd(), time.Second)
		},
		"duplicate rkey": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m := region(t, 4096)
			f := frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 1, addr: m.Addr(), length: 4096}
			_ = c.send(f, m.Fd(), time.Second)
			_ = c.send(f, m.Fd(), time.Second)
		},
		"units not covered to the end": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m1, m2 := region(t, 8192), region(t, 4096)
			// 4096 bytes of an 8192-byte memfd, then the next memfd: the
			// mapping would not be the region's bytes.
			_ = c.sendMsg([]fdFrame{{frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 2, addr: m1.Addr(), length: 8192}, m1.Fd()},
				{frame{typ: frameRegionUnit, rkey: 1, length: 4096}, m2.Fd()}}, time.Second)
		},
		"unit past its memfd": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m1, m2 := region(t, 4096), region(t, 4096)
			_ = c.sendMsg([]fdFrame{{frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 2, addr: m1.Addr(), length: 12288}, m1.Fd()},
				{frame{typ: frameRegionUnit, rkey: 1, length: 8192}, m2.Fd()}}, time.Second)
		},
		"units add up past the region": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m1, m2 := region(t, 4096), region(t, 4096)
			_ = c.sendMsg([]fdFrame{{frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 2, addr: m1.Addr(), length: 4096}, m1.Fd()},
				{frame{typ: frameRegionUnit, rkey: 1, length: 4096}, m2.Fd()}}, time.Second)
		},
		"unit of another region": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m1, m2 := region(t, 4096), region(t, 4096)
			_ = c.sendMsg([]fdFrame{{frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 2, addr: m1.Addr(), length: 8192}, m1.Fd()},
				{frame{typ: frameRegionUnit, rkey: 2, length: 4096}, m2.Fd()}}, time.Second)
		},
		"ready instead of a unit": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			m1 := region(t, 4096)
			_ = c.send(frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, units: 2, addr: m1.Addr(), length: 8192}, m1.Fd(), time.Second)
			_ = c.send(frame{typ: frameReady}, -1, time.Second)
		},
		"EOF in the snapshot": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			c.close()
		},
		"ack instead of ready": func(t *testing.T, c *ctlConn) {
			q, w := goodQueue(t)
			_ = c.send(w, q.Fd(), time.Second)
			_ = c.send(frame{typ: frameAck, acked: frameRegionAdd, rkey: 1}, -1, time.Second)
		},
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			q := newTestQP(t, d, nil)
			ep := fakeAcceptor(t, d, func(c *ctlConn) { script(t, c) })
			err := q.Connect(ctx5(t), ep)
			require.Error(t, err)
			t.Log(err)
			assert.Equal(t, rdma.QPError, q.State())
			assert.Nil(t, q.out.Load(), "nothing left mapped")
			assert.Empty(t, q.remote.Load().m, "nothing left mapped")
		})
	}
}

func TestFollow_BadRegionAfterConnect_QPErrors(t *testing.T) {
	d := openTestDevice(t, Config{})
	q := newTestQP(t, d, nil)
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	ep := fakeAcceptor(t, d, func(c *ctlConn) {
		qm, w := goodQueue(t)
		_ = c.send(w, qm.Fd(), time.Second)
		_ = c.send(frame{typ: frameReady}, -1, time.Second)
		time.Sleep(20 * time.Millisecond)
		_ = c.send(frame{typ: frameRegionAdd, rkey: 5, access: rdma.AccessRemote, units: 1, addr: 4096, length: 4096}, p[0], time.Second)
	})
	require.NoError(t, q.Connect(ctx5(t), ep))
	require.Eventually(t, func() bool { return q.State() == rdma.QPError }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return q.out.Load() == nil }, 5*time.Second, time.Millisecond, "the peer's queue is unmapped")
}

func TestCQ_Full_PostSendRefusedNotOverflowed(t *testing.T) {
	d := openTestDevice(t, Config{})
	cq, err := d.CreateCQ(2)
	require.NoError(t, err)
	a := newTestQP(t, d, cq)
	b := newTestQP(t, d, nil)
	require.NoError(t, a.Connect(ctx5(t), b.LocalEndpoint()))
	require.NoError(t, b.Connect(ctx5(t), a.LocalEndpoint()))
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte{1}, Remote: rdma.RemoteAddr{Addr: mr.Addr(), RKey: mr.RKey()}}
	require.NoError(t, a.PostSend(&wr))
	require.NoError(t, a.PostSend(&wr))
	assert.ErrorIs(t, a.PostSend(&wr), rdma.ErrSendQueueFull, "the CQ holds 2 and the send queue 8: refuse, do not overflow")
	bad := wr
	bad.Remote.RKey ^= 1
	assert.ErrorIs(t, a.PostSend(&bad), rdma.ErrSendQueueFull, "an error needs CQ room too")
	assert.Equal(t, rdma.QPReadyToSend, a.State())
	buf := make([]rdma.Completion, 4)
	assert.Equal(t, 2, cq.Poll(buf))
	require.NoError(t, a.PostSend(&wr))
	assert.Zero(t, cq.(*CQ).q.Overflows.Load())
}

func TestRegion_ReadOnlyForPeers_GetsReadOnlyFD(t *testing.T) {
	d := openTestDevice(t, Config{})
	ro, err := d.RegisterMemory(4096, rdma.AccessRemoteRead)
	require.NoError(t, err)
	rw, err := d.RegisterMemory(4096, rdma.AccessRemoteRead|rdma.AccessRemoteWrite)
	require.NoError(t, err)
	mode := func(fd int) int {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		require.NoError(t, err)
		return fl & unix.O_ACCMODE
	}
	assert.Equal(t, unix.O_RDONLY, mode(ro.(*Region).pieces[0].fd))
	assert.Equal(t, unix.O_RDWR, mode(rw.(*Region).pieces[0].fd))
	_, err = unix.Mmap(ro.(*Region).pieces[0].fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	assert.ErrorIs(t, err, unix.EACCES, "a peer cannot map a read-only region writable")
}

// An unknown opcode completes with an error like any other, and its
// send-queue entry is freed when that completion is polled.
func TestPostSend_UnknownOpcode_FreesItsEntry(t *testing.T) {
	d := openTestDevice(t, Config{})
	cq, err := d.CreateCQ(8)
	require.NoError(t, err)
	for _, op := range []rdma.Opcode{rdma.OpRecv, rdma.OpRecvImm, 0, 200} {
		qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1})
		require.NoError(t, err)
		peer := newTestQP(t, d, nil)
		require.NoError(t, qp.Connect(ctx5(t), peer.LocalEndpoint()))
		wr := rdma.WorkRequest{Op: op, Flags: rdma.FlagInline, Inline: []byte{1}}
		require.NoError(t, qp.PostSend(&wr))
		buf := make([]rdma.Completion, 2)
		require.Equal(t, 1, cq.Poll(buf))
		assert.Equal(t, rdma.StatusLocalQPOp, buf[0].Status, "%s", op)
		require.NoError(t, qp.PostSend(&wr), "%s: the entry was freed (the QP is in ERR now: flushed)", op)
		require.Equal(t, 1, cq.Poll(buf))
		assert.Equal(t, rdma.StatusFlushed, buf[0].Status)
	}
}

func TestConnect_UnsealedMemfd_Refused(t *testing.T) {
	d := openTestDevice(t, Config{})
	q := newTestQP(t, d, nil)
	ep := fakeAcceptor(t, d, func(c *ctlConn) {
		good, w := goodQueue(t)
		fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
		if err != nil {
			return
		}
		defer unix.Close(fd)
		if unix.Ftruncate(fd, int64(len(good.Bytes()))) != nil {
			return
		}
		m, err := unix.Mmap(fd, 0, len(good.Bytes()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return
		}
		copy(m, good.Bytes())
		_ = unix.Munmap(m)
		_ = c.send(w, fd, time.Second)
	})
	err := q.Connect(ctx5(t), ep)
	assert.ErrorIs(t, err, ErrProtocol, "a peer that could shrink the memory under us is refused")
	assert.Equal(t, rdma.QPError, q.State())
}

func TestRegisterMemory_SizeSealed(t *testing.T) {
	d := openTestDevice(t, Config{})
	mr, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	fd := mr.(*Region).pieces[0].fd
	assert.Error(t, unix.Ftruncate(fd, 0), "nobody can shrink a region's memfd")
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	assert.NotZero(t, seals&unix.F_SEAL_SHRINK)
}

// Reliable-connected means one peer: a QP reached by x refuses to Connect
// to z, and a QP that named w refuses x's connection.
func TestConnect_OnePeerOnly(t *testing.T) {
	d := openTestDevice(t, Config{})
	x, y, z := newTestQP(t, d, nil), newTestQP(t, d, nil), newTestQP(t, d, nil)
	require.NoError(t, x.Connect(ctx5(t), y.LocalEndpoint()))
	assert.ErrorIs(t, y.Connect(ctx5(t), z.LocalEndpoint()), rdma.ErrPeerRefused, "y is reached by x")
	assert.Equal(t, rdma.QPError, y.State())

	v, w, u := newTestQP(t, d, nil), newTestQP(t, d, nil), newTestQP(t, d, nil)
	require.NoError(t, v.Connect(ctx5(t), w.LocalEndpoint()))
	assert.ErrorIs(t, u.Connect(ctx5(t), v.LocalEndpoint()), rdma.ErrPeerRefused, "v named w, not u")
	assert.Equal(t, rdma.QPReadyToSend, v.State(), "v is unaffected")
	require.NoError(t, w.Connect(ctx5(t), v.LocalEndpoint()), "w, v's named peer, gets in")
}

// A connected peer that never acks a region push costs RegisterMemory at
// most ControlTimeout; that peer loses its connection (its QP here goes to
// ERR) and everything else goes on.
func TestRegisterMemory_SilentPeer_BoundedAndDropped(t *testing.T) {
	d := openTestDevice(t, Config{ControlTimeout: 200 * time.Millisecond})
	a, _, cq, mr := connectedPair(t, d)
	victim := newTestQP(t, d, nil)
	c := rawDial(t, d.Addr())
	require.NoError(t, c.send(frame{typ: frameHello, dstQPN: victim.num, dstNonce: victim.nonce, srcQPN: 1}, -1, time.Second))
	for {
		f, fd, err := c.recv(time.Now().Add(5 * time.Second))
		require.NoError(t, err)
		closeFD(fd)
		if f.typ == frameReady {
			break
		}
	}
	t0 := time.Now()
	_, err := d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err, "returns (the package's -timeout catches a hang)")
	t.Logf("RegisterMemory with a silent peer took %v (ControlTimeout 200ms)", time.Since(t0))
	require.Eventually(t, func() bool { return victim.State() == rdma.QPError }, 5*time.Second, time.Millisecond)
	writeOK(t, a, cq, mr)
}
