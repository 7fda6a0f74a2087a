// Package shmtest plays a hostile peer of an shm queue pair, for tests of
// what a peer can reach beyond its grants.
package shmtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
)

// The shm control protocol as a peer sees it (rdma/shm/wire.go), written
// out apart from the provider so that this peer runs none of its checks.
const (
	wireVersion    = 2
	frameHello     = 1
	frameWelcome   = 2
	frameRefuse    = 3
	frameRegionAdd = 4
	frameReady     = 6
	frameUnit      = 8
)

// Hostile is rdmatest.Provider.Hostile for shm: it connects to qp (not yet
// connected) as its peer would, keeps every memfd qp's device sends for
// its regions and maps each whole: writable if the fd allows, read-only
// otherwise. The last Held closes the connection.
func Hostile(qp rdma.QueuePair) ([]rdmatest.Held, error) {
	ep := qp.LocalEndpoint()
	if ep.Provider != rdma.ProviderShm {
		return nil, fmt.Errorf("shmtest: a %s queue pair", ep.Provider)
	}
	nc, err := net.Dial("unixpacket", ep.Addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.UnixConn)
	var held []rdmatest.Held
	fail := func(err error) ([]rdmatest.Held, error) {
		for _, h := range held {
			h.Close()
		}
		c.Close()
		return nil, err
	}
	hello := []byte{wireVersion, frameHello, 24, 0}
	hello = binary.LittleEndian.AppendUint32(hello, ep.QPN)
	hello = binary.LittleEndian.AppendUint64(hello, ep.Nonce)
	hello = binary.LittleEndian.AppendUint32(hello, 1)
	hello = binary.LittleEndian.AppendUint64(hello, 0x5eed)
	if _, err := c.Write(hello); err != nil {
		return fail(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return fail(err)
	}
	for {
		var buf [256]byte
		oob := make([]byte, unix.CmsgSpace(4*4))
		n, oobn, _, _, err := c.ReadMsgUnix(buf[:], oob)
		if err != nil {
			return fail(err)
		}
		fds := rights(oob[:oobn])
		if n < 2 {
			closeAll(fds)
			return fail(fmt.Errorf("shmtest: frame of %d bytes", n))
		}
		switch buf[1] {
		case frameReady:
			closeAll(fds)
			// Keep the connection until the caller is done: qp's device
			// sees a live peer.
			return append(held, rdmatest.Held{Close: func() { c.Close() }}), nil
		case frameRefuse:
			closeAll(fds)
			return fail(errors.New("shmtest: refused"))
		case frameRegionAdd, frameUnit:
			for _, fd := range fds {
				h, err := mapWhole(fd)
				unix.Close(fd)
				if err != nil {
					return fail(err)
				}
				held = append(held, h)
			}
		default: // welcome: our own receive queue, not qp's device's memory
			closeAll(fds)
		}
	}
}

func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
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
		return rdmatest.Held{}, fmt.Errorf("shmtest: map a memfd of %d bytes: %w", st.Size, err)
	}
	return rdmatest.Held{Mem: m, Writable: writable, Close: func() { _ = unix.Munmap(m) }}, nil
}
