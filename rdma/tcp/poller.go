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
// Connections are registered one-shot and level-triggered: a reader arms
// its connection (arm) only when it is about to wait, and the first
// readiness after that (data, or a hang-up) sends it a token on a channel
// of one and disarms the connection again. A reader that is busy, or
// spinning on non-blocking reads, costs the poller nothing: it is not woken
// for every arrival, as it was when connections were registered
// edge-triggered for good (a thread wake-up and a goroutine hand-off per
// segment, on both ends of every stream). Level-triggered, arming after
// data already arrived fires at once, so no arrival is missed between a
// reader's last empty read and its wait.
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

// pollEvents is a connection's registration: one-shot, level-triggered.
const pollEvents = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT

// add registers c, disarmed: nothing notifies c until it calls arm.
func (p *poller) add(c *rawConn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Added armed, the registration fires once at most, for data that
	// arrived before the reader's first read: a spare token, harmless.
	ev := unix.EpollEvent{Events: pollEvents, Fd: int32(c.fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		return fmt.Errorf("tcp: epoll_ctl add: %w", err)
	}
	p.conns[int32(c.fd)] = c
	return nil
}

// arm asks for one token when c is readable (or hung up), at once if it is
// now. Called by c's reader before it waits; its fd is open (a user holds
// it). An error means the registration is gone (unexpected): c gets a
// token anyway, so its reader polls instead of waiting for good.
func (p *poller) arm(c *rawConn) {
	ev := unix.EpollEvent{Events: pollEvents, Fd: int32(c.fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		c.notify()
	}
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
