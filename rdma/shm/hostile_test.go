package shm

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
)

// HostilePeer is rdmatest.Provider.Hostile for shm: a peer of b that
// keeps every region memfd b's device sends it and maps each whole,
// writable if the fd allows, read-only otherwise (see export for shm_test).
var HostilePeer = hostilePeer

func hostilePeer(qp rdma.QueuePair) ([]rdmatest.Held, error) {
	b, ok := qp.(*QP)
	if !ok {
		return nil, fmt.Errorf("not an shm QP: %T", qp)
	}
	nc, err := net.Dial("unixpacket", b.dev.Addr())
	if err != nil {
		return nil, err
	}
	c := newCtlConn(nc.(*net.UnixConn))
	var held []rdmatest.Held
	fail := func(err error) ([]rdmatest.Held, error) {
		for _, h := range held {
			h.Close()
		}
		c.close()
		return nil, err
	}
	if err := c.send(frame{typ: frameHello, dstQPN: b.num, dstNonce: b.nonce, srcQPN: 1, srcNonce: random64()}, -1, time.Second); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, fd, err := c.recv(deadline)
		if err != nil {
			return fail(err)
		}
		switch f.typ {
		case frameReady:
			// Keep the connection until the case is done: b's device
			// sees a live peer.
			held = append(held, rdmatest.Held{Close: c.close})
			return held, nil
		case frameWelcome: // our own receive queue, not b's memory
			closeFD(fd)
			continue
		case frameRegionAdd, frameRegionUnit:
		default:
			closeFD(fd)
			return fail(fmt.Errorf("unexpected %s frame", f.typ))
		}
		h, err := mapWhole(fd)
		closeFD(fd)
		if err != nil {
			return fail(err)
		}
		held = append(held, h)
	}
}

// mapWhole maps the whole file behind fd, shared: writable if it can be.
func mapWhole(fd int) (rdmatest.Held, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return rdmatest.Held{}, err
	}
	writable := true
	m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if errors.Is(err, unix.EACCES) {
		writable = false
		m, err = unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	}
	if err != nil {
		return rdmatest.Held{}, err
	}
	return rdmatest.Held{Mem: m, Writable: writable, Close: func() { _ = unix.Munmap(m) }}, nil
}
