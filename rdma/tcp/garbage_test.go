package tcp

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// fakePeer is a raw TCP listener that completes the handshake for any QP
// and then reads and drops everything: a peer that never answers.
type fakePeer struct {
	ln    net.Listener
	conns chan net.Conn
}

func startFakePeer(t *testing.T, closeAfterHandshake bool) *fakePeer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &fakePeer{ln: ln, conns: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns <- c
			go func() {
				defer c.Close()
				h, err := readHello(c)
				if err != nil {
					return
				}
				// it holds endpoint()'s nonce, so it proves it
				if _, err := c.Write(marshalReply(hsOK, 1<<20, replyMAC(1, hsOK, 1<<20, &h))); err != nil || closeAfterHandshake {
					return
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(p.conns)
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *fakePeer) endpoint() rdma.Endpoint {
	return rdma.Endpoint{Provider: rdma.ProviderTCP, HostID: "fake", QPN: 1, Nonce: 1, Addr: p.ln.Addr().String()}
}

type rig struct {
	dev *Device
	cq  rdma.CompletionQueue
	qp  *QP
	mr  rdma.MemoryRegion
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	cfg.HostID = "rig"
	d, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	cq, err := d.CreateCQ(64)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)
	for i := range mr.Bytes() {
		mr.Bytes()[i] = byte(i)
	}
	return &rig{dev: d, cq: cq, qp: qp.(*QP), mr: mr}
}

func pollOne(t *testing.T, cq rdma.CompletionQueue) rdma.Completion {
	t.Helper()
	var buf [1]rdma.Completion
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cq.Poll(buf[:]) == 1 {
			return buf[0]
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatal("no completion within 10s")
	return rdma.Completion{}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// dialAs opens a data connection to r's QP, handshaking as the fake peer.
func dialAs(t *testing.T, r *rig, src rdma.Endpoint) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", r.dev.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ep := r.qp.LocalEndpoint()
	h := hello{host: "fake", dstQPN: ep.QPN, srcQPN: src.QPN, srcNonce: src.Nonce, maxMsg: 1 << 20}
	h.sign(ep.Nonce)
	_, err = c.Write(h.marshal())
	require.NoError(t, err)
	var rb [replyLen]byte
	_, err = io.ReadFull(c, rb[:])
	require.NoError(t, err)
	st, _, _, err := decodeReply(rb[:])
	require.NoError(t, err)
	require.Equal(t, hsOK, st)
	return c
}

// healthyPair connects a second QP of r's device to a real peer device and
// returns a function that checks a WRITE still works both ways.
func healthyPair(t *testing.T, r *rig) func() {
	other := newRig(t, Config{})
	cq, err := r.dev.CreateCQ(16)
	require.NoError(t, err)
	qp, err := r.dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, qp.Connect(ctx, other.qp.LocalEndpoint()))
	require.NoError(t, other.qp.Connect(ctx, qp.LocalEndpoint()))
	return func() {
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Inline: []byte("ok"),
			Remote: rdma.RemoteAddr{Addr: r.mr.Addr() + 4000, RKey: r.mr.RKey()}}
		wr.Flags |= rdma.FlagInline
		require.NoError(t, other.qp.PostSend(&wr))
		assert.Equal(t, rdma.StatusSuccess, pollOne(t, other.cq).Status)
		assert.Equal(t, "ok", string(r.mr.Bytes()[4000:4002]))
		wr.Remote = rdma.RemoteAddr{Addr: other.mr.Addr(), RKey: other.mr.RKey()}
		require.NoError(t, qp.PostSend(&wr))
		assert.Equal(t, rdma.StatusSuccess, pollOne(t, cq).Status)
	}
}

func TestResponder_GarbageClosesOnlyThatConnection(t *testing.T) {
	valid := func(seq uint64, n uint32) []byte {
		b := make([]byte, reqHeaderLen)
		(&request{op: rdma.OpWrite, len: n, seq: seq, raddr: 0, rkey: 0}).put(b)
		return b
	}
	cases := map[string]func(r *rig) []byte{
		"random bytes": func(*rig) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n.....................") },
		"unknown op": func(*rig) []byte {
			b := valid(1, 0)
			b[0] = 42
			return b
		},
		"seq out of order": func(*rig) []byte { return valid(2, 0) },
		"len over the limit": func(r *rig) []byte {
			return valid(1, uint32(r.dev.cfg.MaxMsgSize)+1)
		},
		"truncated payload": func(r *rig) []byte {
			b := make([]byte, reqHeaderLen)
			(&request{op: rdma.OpWrite, len: 100, seq: 1, raddr: r.mr.Addr(), rkey: r.mr.RKey()}).put(b)
			return append(b, make([]byte, 50)...) // then the connection ends
		},
		"truncated header": func(*rig) []byte { return valid(1, 0)[:20] },
		// A WRITE list is checked whole before any of it is applied: its
		// first WRITE, valid, must not land either.
		"WRITE list, second entry bad": func(r *rig) []byte {
			return writeList(r, 2, func(i int, e *listElem) {
				if i == 1 {
					e.flags = 0x80
				}
			}, 0)
		},
		"WRITE list, entry longer than the list": func(r *rig) []byte {
			return writeList(r, 2, func(i int, e *listElem) {
				if i == 1 {
					e.len = 9
				}
			}, 0)
		},
		"WRITE list, bytes after the last entry": func(r *rig) []byte { return writeList(r, 2, nil, 3) },
		"WRITE list, truncated": func(r *rig) []byte {
			b := writeList(r, 3, nil, 0)
			return b[:len(b)-5] // then the connection ends
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, Config{})
			before := append([]byte(nil), r.mr.Bytes()...)
			check := healthyPair(t, r)
			fake := startFakePeer(t, false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, r.qp.Connect(ctx, fake.endpoint()))
			// Outstanding requests the fake never answers.
			for i := 0; i < 3; i++ {
				wr := rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, Flags: rdma.FlagSignaled,
					Local: rdma.LocalSGE(r.mr, 0, 8), Remote: rdma.RemoteAddr{Addr: 4096, RKey: 1 << 20}}
				require.NoError(t, r.qp.PostSend(&wr))
			}
			c := dialAs(t, r, fake.endpoint())
			_, err := c.Write(mk(r))
			require.NoError(t, err)
			c.(*net.TCPConn).CloseWrite()

			eventually(t, "QP in ERR", func() bool { return r.qp.State() == rdma.QPError })
			for i := 0; i < 3; i++ {
				got := pollOne(t, r.cq)
				assert.Equal(t, rdma.StatusFlushed, got.Status)
				assert.Equal(t, uint64(i), got.ID)
			}
			// The device closed the garbage connection.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, c)
			assert.False(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "connection left open: %v", err)
			assert.Equal(t, before, r.mr.Bytes(), "target memory touched")
			check()
			assert.Equal(t, "ok", string(r.mr.Bytes()[4000:4002]))
		})
	}
}

// writeList is a WRITE list frame (seq 1) of n 8-byte WRITEs into r's
// region, each entry passed through edit, with extra bytes appended inside
// the frame.
func writeList(r *rig, n int, edit func(int, *listElem), extra int) []byte {
	var body []byte
	for i := 0; i < n; i++ {
		e := listElem{raddr: r.mr.Addr() + uint64(8*i), len: 8}
		payload := []byte{0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
		if edit != nil {
			edit(i, &e)
		}
		var eh [listElemLen]byte
		e.put(eh[:])
		body = append(append(body, eh[:]...), payload...)
	}
	body = append(body, make([]byte, extra)...)
	b := make([]byte, reqHeaderLen)
	(&request{op: opWriteList, len: uint32(len(body)), seq: 1, rkey: r.mr.RKey(), imm: uint32(n)}).put(b)
	return append(b, body...)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestHandshake_BadHelloClosedAndDeviceKeepsServing(t *testing.T) {
	r := newRig(t, Config{ConnectTimeout: 300 * time.Millisecond})
	check := healthyPair(t, r)
	// Garbage instead of a hello.
	c, err := net.Dial("tcp", r.dev.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(make([]byte, helloLen))
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, c)
	assert.False(t, isTimeout(err))
	// Silence: closed after ConnectTimeout.
	s, err := net.Dial("tcp", r.dev.Addr())
	require.NoError(t, err)
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, s)
	assert.False(t, isTimeout(err), "silent connection left open")
	// A hello of a future version is answered so the dialler can say why.
	h := hello{host: "x", dstQPN: r.qp.num, srcQPN: 1, srcNonce: 1, maxMsg: 1}
	h.sign(r.qp.nonce)
	b := h.marshal()
	b[4] = 9
	v, err := net.Dial("tcp", r.dev.Addr())
	require.NoError(t, err)
	defer v.Close()
	_, err = v.Write(b)
	require.NoError(t, err)
	var rb [replyLen]byte
	_, err = io.ReadFull(v, rb[:])
	require.NoError(t, err)
	st, _, _, err := decodeReply(rb[:])
	require.NoError(t, err)
	assert.Equal(t, hsBadVersion, st)
	assert.Equal(t, rdma.QPReset, r.qp.State())
	check()
}

func TestConnect_WrongNonceOrQPN_IsPeerNotFound(t *testing.T) {
	a, b := newRig(t, Config{}), newRig(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ep := b.qp.LocalEndpoint()
	ep.Nonce++
	assert.ErrorIs(t, a.qp.Connect(ctx, ep), rdma.ErrPeerNotFound)
	assert.Equal(t, rdma.QPError, a.qp.State())

	a2 := newRig(t, Config{})
	ep = b.qp.LocalEndpoint()
	ep.QPN++
	assert.ErrorIs(t, a2.qp.Connect(ctx, ep), rdma.ErrPeerNotFound)

	// A second QP naming b's QP while b expects another peer is refused.
	a3 := newRig(t, Config{})
	require.NoError(t, b.qp.Connect(ctx, a3.qp.LocalEndpoint()))
	a4 := newRig(t, Config{})
	assert.ErrorIs(t, a4.qp.Connect(ctx, b.qp.LocalEndpoint()), rdma.ErrPeerRefused)
	require.NoError(t, a3.qp.Connect(ctx, b.qp.LocalEndpoint()))
	assert.Equal(t, rdma.QPReadyToSend, a3.qp.State())
}

func TestConnect_OtherProviderLeavesReset(t *testing.T) {
	a := newRig(t, Config{})
	err := a.qp.Connect(context.Background(), rdma.Endpoint{Provider: rdma.ProviderShm, Addr: "x"})
	assert.ErrorIs(t, err, rdma.ErrProviderMismatch)
	assert.Equal(t, rdma.QPReset, a.qp.State())
}

func TestConnect_NobodyListening_FailsWithinTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	a := newRig(t, Config{ConnectTimeout: time.Second})
	err = a.qp.Connect(context.Background(), rdma.Endpoint{Provider: rdma.ProviderTCP, QPN: 1, Addr: addr})
	assert.ErrorIs(t, err, rdma.ErrPeerRefused)
	assert.Equal(t, rdma.QPError, a.qp.State())
}

func TestQP_SilentPeer_RetryExceededAfterAckTimeout(t *testing.T) {
	r := newRig(t, Config{AckTimeout: 200 * time.Millisecond})
	fake := startFakePeer(t, false)
	require.NoError(t, r.qp.Connect(context.Background(), fake.endpoint()))
	for i := 0; i < 3; i++ {
		wr := rdma.WorkRequest{ID: uint64(i), Op: rdma.OpWrite, Local: rdma.LocalSGE(r.mr, 0, 8),
			Remote: rdma.RemoteAddr{Addr: 4096, RKey: 1 << 20}}
		require.NoError(t, r.qp.PostSend(&wr))
	}
	assert.Equal(t, rdma.Completion{ID: 0, Status: rdma.StatusRetryExceeded, Op: rdma.OpWrite, QPN: r.qp.num}, pollOne(t, r.cq))
	assert.Equal(t, rdma.StatusFlushed, pollOne(t, r.cq).Status)
	assert.Equal(t, rdma.StatusFlushed, pollOne(t, r.cq).Status)
	assert.Equal(t, rdma.QPError, r.qp.State())
}

func TestQP_PeerHangsUp_InFlightRetryExceeded(t *testing.T) {
	r := newRig(t, Config{})
	fake := startFakePeer(t, true)
	require.NoError(t, r.qp.Connect(context.Background(), fake.endpoint()))
	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: rdma.LocalSGE(r.mr, 0, 8), Remote: rdma.RemoteAddr{Addr: 4096, RKey: 1 << 20}}
	// The peer may already be gone when we post; either way the request
	// completes with an error, never success, and the QP ends in ERR.
	require.NoError(t, r.qp.PostSend(&wr))
	got := pollOne(t, r.cq)
	assert.Contains(t, []rdma.Status{rdma.StatusRetryExceeded, rdma.StatusFlushed}, got.Status)
	eventually(t, "ERR", func() bool { return r.qp.State() == rdma.QPError })
}
