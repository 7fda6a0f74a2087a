package tcp

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/rdma"
)

// Config configures a tcp Device. The zero value works: a listener on
// loopback at a random port, named after the host.
type Config struct {
	// HostID names this host in endpoints; default os.Hostname().
	HostID string
	// Listen is the address the device's listener binds, which peers dial;
	// default "127.0.0.1:0".
	Listen string
	// Advertise is put in endpoints instead of the listener's address, when
	// peers reach this host by another address (NAT, 0.0.0.0 listeners).
	Advertise string
	// Logger gets control-path events only; default zerolog.Nop().
	Logger zerolog.Logger

	// ConnectTimeout bounds dialling and the handshake; default 5s.
	ConnectTimeout time.Duration
	// AckTimeout: a queue pair whose oldest outstanding request got no
	// answer for this long moves to ERR and the request completes with
	// StatusRetryExceeded; default 5s.
	AckTimeout time.Duration
	// MaxMsgSize is the largest single transfer (Caps().MaxMsgSize) and the
	// largest frame payload this device accepts; default 1 MiB, at most
	// 64 MiB.
	MaxMsgSize int
	// SendBuffer is the per-QP buffer, in bytes, between PostSend and the
	// goroutine that writes to the socket; PostSend returns
	// rdma.ErrSendQueueFull when a request does not fit. Default and minimum
	// 2×(MaxMsgSize+48), rounded up to a power of two.
	SendBuffer int
	// CloseLinger bounds how long QP.Close waits for the peer to answer
	// requests already posted before it drops them; default 1s.
	CloseLinger time.Duration
	// FlushSpins is how many times the socket-writing goroutine yields,
	// finding nothing to send, before it parks; default 1. A post wakes
	// a parked one, which then runs on the poster's P at the poster's next
	// idle step (rdma.Yield).
	FlushSpins int
	// ReadSpins is how many non-blocking reads, each followed by a yield,
	// a connection's reader tries before it waits for the process's epoll
	// goroutine; default none (0 or negative). On a host whose cores are
	// all busy, a spinning reader is one more runnable thread that the
	// kernel time-slices with the rest, and it runs late; a reader that
	// waits is woken by the kernel when data arrives (and the epoll
	// goroutine hands it over on its own thread). Measured on this
	// project's loaded 2-core VM in tickbus bench (load 4-6, side by side):
	// tickbus-tcp p50 23-30 µs with no spins against 48-54 µs with 200
	// (and FlushSpins 1), 74-87 µs with both spinning (FlushSpins 64).
	// Spins help where a core is free for each reader.
	ReadSpins int
	// DirectLoopback lets a QP whose peer is an unconfined QP of this very
	// device hand out that memory through rdma.DirectMapper (direct.go), so
	// that a publisher claims on its own home with CPU atomics instead of a
	// round trip through the loopback socket. Default off: every op goes
	// on the wire, as the provider's own tests want it; the link layer
	// (link.Devices) turns it on.
	DirectLoopback bool
}

const (
	defaultConnectTimeout = 5 * time.Second
	defaultAckTimeout     = 5 * time.Second
	defaultMaxMsgSize     = 1 << 20
	maxMaxMsgSize         = 64 << 20
	defaultFlushSpins     = 1
	maxInline             = 1024
	maxQPDepth            = 1 << 16
	maxCQDepth            = 1 << 24
)

func (c Config) withDefaults() (Config, error) {
	if c.HostID == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("tcp: HostID empty and hostname unknown: %w", err)
		}
		c.HostID = h
	}
	if len(c.HostID) > 255 {
		return c, fmt.Errorf("%w: HostID of %d bytes, want at most 255", rdma.ErrInvalidConfig, len(c.HostID))
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("%w: Listen %q, want host:port: %v", rdma.ErrInvalidConfig, c.Listen, err)
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return c, fmt.Errorf("%w: Advertise %q, want host:port: %v", rdma.ErrInvalidConfig, c.Advertise, err)
		}
	}
	if c.ConnectTimeout < 0 || c.AckTimeout < 0 || c.CloseLinger < 0 || c.MaxMsgSize < 0 || c.SendBuffer < 0 || c.FlushSpins < 0 {
		return c, fmt.Errorf("%w: negative timeout or size in %+v", rdma.ErrInvalidConfig, c)
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = defaultAckTimeout
	}
	if c.CloseLinger == 0 {
		c.CloseLinger = time.Second
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = defaultMaxMsgSize
	}
	if c.MaxMsgSize > maxMaxMsgSize {
		return c, fmt.Errorf("%w: MaxMsgSize %d, want at most %d", rdma.ErrInvalidConfig, c.MaxMsgSize, maxMaxMsgSize)
	}
	min := 2 * (c.MaxMsgSize + reqHeaderLen)
	if c.SendBuffer < min {
		c.SendBuffer = min
	}
	n := 1
	for n < c.SendBuffer {
		n <<= 1
	}
	c.SendBuffer = n
	if c.FlushSpins == 0 {
		c.FlushSpins = defaultFlushSpins
	}
	if c.ReadSpins < 0 {
		c.ReadSpins = 0
	}
	return c, nil
}
