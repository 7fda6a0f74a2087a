package tcp

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// poller is the one goroutine of the process that blocks in epoll_wait for
// every quiet data connection, so that quiet readers wait on a channel
// (which gives their P back to the scheduler) instead of each blocking in
// read(2) (which keeps a P until sysmon takes it back, milliseconds later
// when sysmon is idle). At most one P is ever held by a blocked reader.
//
// Connections are registered edge-triggered: every arrival of data (or a
// hang-up) sends the connection's reader a token on a channel of one.
type poller struct {
	epfd   int
	wakefd int // eventfd: Close writes it to stop the loop
	done   chan struct{}

	mu    sync.Mutex
	conns map[int32]*rawConn
}

var shared struct {
	sync.Mutex
	p    *poller
	refs int
}

// acquirePoller returns the process's poller, starting it for the first
// device. Every call is paired with releasePoller.
func acquirePoller() (*poller, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.p == nil {
		p, err := newPoller()
		if err != nil {
			return nil, err
		}
		shared.p = p
	}
	shared.refs++
	return shared.p, nil
}

// releasePoller stops the poller when the last device lets it go.
func releasePoller() error {
	shared.Lock()
	defer shared.Unlock()
	shared.refs--
	if shared.refs > 0 || shared.p == nil {
		return nil
	}
	p := shared.p
	shared.p = nil
	return p.close()
}

func newPoller() (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("tcp: epoll_create1: %w", err)
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("tcp: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		unix.Close(wakefd)
		unix.Close(epfd)
		return nil, fmt.Errorf("tcp: epoll_ctl: %w", err)
	}
	p := &poller{epfd: epfd, wakefd: wakefd, done: make(chan struct{}), conns: map[int32]*rawConn{}}
	go p.loop()
	return p, nil
}

func (p *poller) loop() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Not expected (EBADF, EFAULT, EINVAL would be bugs here). Never
			// crash and never strand a reader: wake them all and degrade to
			// polling every millisecond.
			p.mu.Lock()
			for _, c := range p.conns {
				c.notify()
			}
			p.mu.Unlock()
			time.Sleep(time.Millisecond)
			continue
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(p.wakefd) {
				return
			}
			p.mu.Lock()
			c := p.conns[ev.Fd]
			p.mu.Unlock()
			if c != nil {
				c.notify()
			}
		}
		// Let the readers just woken run (they were readied onto this
		// goroutine's P) before this goroutine blocks with the P again.
		runtime.Gosched()
	}
}

// add registers c; from now on data arriving on it notifies c.
func (p *poller) add(c *rawConn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		return fmt.Errorf("tcp: epoll_ctl add: %w", err)
	}
	p.conns[int32(c.fd)] = c
	return nil
}

// remove deregisters c; call it before its fd is closed.
func (p *poller) remove(c *rawConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns[int32(c.fd)] == c {
		delete(p.conns, int32(c.fd))
		unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
}

func (p *poller) close() error {
	var one = [8]byte{1}
	_, err := unix.Write(p.wakefd, one[:])
	<-p.done
	return errors.Join(err, unix.Close(p.wakefd), unix.Close(p.epfd))
}
