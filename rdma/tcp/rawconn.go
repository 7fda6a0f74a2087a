package tcp

import (
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/handoff"
)

// rawConn does a data connection's I/O with system calls on the socket, not
// through Go's network poller.
//
// Why: pollers spin on their CQs and call runtime.Gosched now and then
// (rdma.Yield), which keeps the scheduler's run queues non-empty, and the
// scheduler polls the network
// only when it runs out of work (or from sysmon, every 10 ms). A reader
// parked in the netpoller would then wake up to 10 ms late. Blocking in
// read(2) instead is no better at scale: a blocked system call keeps its P
// (Go's scheduler slot) until sysmon takes it back, and with a reader per
// connection every P can be held so. So Read never blocks in the kernel:
// it tries Config.ReadSpins non-blocking reads (none by default), yielding
// between them, and then waits on a channel for the process's one epoll
// goroutine (poller.go) to say data arrived. Writes are blocking writes (the socket buffer
// rarely fills).
//
// The fd stays owned by the net.Conn. shutdown wakes blocked readers and
// writers; the fd is closed only when the last goroutine using it calls
// release, so a late read can never hit a reused descriptor number.
type rawConn struct {
	c     net.Conn
	fd    int
	spins int // non-blocking reads, each followed by a yield, before waiting
	// spinWhen, if set, says whether spinning is worth it now (the reaper:
	// while an answer someone waits for is due, see spinLimit); false
	// waits at once.
	spinWhen func() bool
	p        *poller
	ready    chan struct{} // a token per arrival, from the poller
	// owed and answer, if set, are the responder's (serve.go): owed
	// reports whether it holds back acknowledgements, which answer
	// writes if Read waits ackDelay for input with owed true. Set before
	// the first Read, by the connection's one reader; idle is its timer.
	owed   func() bool
	answer func()
	idle   *time.Timer

	mu         sync.Mutex
	users      int
	closed     bool
	registered bool
}

// newRawConn wraps c for users goroutines, each of which calls release
// when done with it.
func newRawConn(c net.Conn, p *poller, users, spins int) (*rawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("tcp: %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("tcp: raw connection: %w", err)
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return nil, fmt.Errorf("tcp: raw connection: %w", err)
	}
	return &rawConn{c: c, fd: fd, users: users, spins: spins, p: p, ready: make(chan struct{}, 1)}, nil
}

// block switches the socket to blocking mode (for writes; reads never
// block) and registers it with the poller; call it before the first Read or
// Write and after the last use of the net.Conn's own methods.
func (r *rawConn) block() error {
	if err := unix.SetNonblock(r.fd, false); err != nil {
		return fmt.Errorf("tcp: blocking mode: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("tcp: connection closed before it started")
	}
	if err := r.p.add(r); err != nil {
		return err
	}
	r.registered = true
	handoff.NetOpen() // yielding poll loops look for the poller's wake-ups more often (rdma/idle_linux.go)
	return nil
}

// notify hands the reader a token; the poller calls it on every arrival.
func (r *rawConn) notify() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// wait waits for the poller's next token: an arrival or a hang-up since the
// last token (or a shutdown). A token for data already read only
// makes the caller read once more. A responder that
// holds back acknowledgements gets ackDelay for more input to come; then
// it answers and waits on.
func (r *rawConn) wait() {
	if r.owed != nil && r.owed() {
		if r.idle == nil {
			r.idle = time.NewTimer(ackDelay)
		} else {
			r.idle.Reset(ackDelay)
		}
		select {
		case <-r.ready:
			r.idle.Stop() // no stale fire after Stop (Go 1.23 timers)
			return
		case <-r.idle.C:
			r.answer()
		}
	}
	<-r.ready
}

// spinLimit is how many empty reads Read spins through before it waits:
// ReadSpins, or for a reader with spinWhen (the reaper) at least dueSpins
// while spinWhen holds and none otherwise.
func (r *rawConn) spinLimit() int {
	switch {
	case r.spinWhen == nil:
		return r.spins
	case r.spinWhen():
		return max(r.spins, dueSpins)
	}
	return 0
}

// dueSpins is how many empty reads a reaper spins through while an answer
// its poster waits for is due (a claim's CAS, a READ): that wait is the
// poster's own latency, and an answer comes within a round trip.
const dueSpins = 200

// ackDelay is how long a responder waits for more input before it answers
// the unsignalled WRITEs and SENDs it applied (frame.go, reqSignaled): far
// above the gap between the ticks of a live feed, which then needs no ACK
// but the signalled ones', and far below Config.AckTimeout and CloseLinger,
// which wait on the answer when the requester stops.
const ackDelay = time.Millisecond

// Read reads without ever blocking in the kernel: it tries, yields and
// tries again ReadSpins times, then waits for the poller's token.
func (r *rawConn) Read(b []byte) (int, error) {
	for i := 0; ; i++ {
		n, err := recvNoWait(r.fd, b)
		if err == unix.EAGAIN {
			if i < r.spinLimit() {
				rdma.Yield{}.Idle(0) // not Gosched: that would wake an idle P's thread per empty read
				continue
			}
			r.wait()
			i = 0
			continue
		}
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (r *rawConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(r.fd, b[done:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// recvNoWait is recv(2) with MSG_DONTWAIT, without allocating.
func recvNoWait(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// writev writes a then b with as few system calls as the kernel allows.
func (r *rawConn) writev(iov *[2][]byte) error {
	bufs := iov[:]
	for len(bufs) > 0 {
		n, err := unix.Writev(r.fd, bufs)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][n:]
			n = 0
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}

// shutdown ends the connection both ways and wakes anyone blocked on it.
// Idempotent; safe from any goroutine.
func (r *rawConn) shutdown() {
	r.mu.Lock()
	if !r.closed {
		unix.Shutdown(r.fd, unix.SHUT_RDWR)
	}
	r.mu.Unlock()
	r.notify() // a reader waiting for data now reads EOF
}

// release is called once by each user when it no longer touches the fd;
// the last one closes it.
func (r *rawConn) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users--
	if r.users == 0 && !r.closed {
		r.closed = true
		if r.registered {
			r.p.remove(r)
			handoff.NetClose()
		}
		unix.Shutdown(r.fd, unix.SHUT_RDWR)
		r.c.Close()
	}
}

func (r *rawConn) remoteAddr() string { return r.c.RemoteAddr().String() }
