package link

import (
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// Profile sizes one queue pair and its completion queue.
type Profile struct {
	SendDepth, RecvDepth, CQDepth int
}

// The depths each role uses.
var (
	// Writer: a publisher's queue pairs to subscribers' rings and to the
	// topic's home. The writer's staging (1024 slots by default) must
	// exceed the send depth; it signals one write in 16, so the CQ holds
	// many batches' completions.
	Writer = Profile{SendDepth: 256, RecvDepth: 16, CQDepth: 8192}
	// Responder: the passive end a publisher connects to (a subscriber's
	// ring): it posts nothing on the hot path.
	Responder = Profile{SendDepth: 64, RecvDepth: 16, CQDepth: 256}
	// Query: a short-lived pair that posts one READ (the home's counter).
	Query = Profile{SendDepth: 16, RecvDepth: 16, CQDepth: 16}
)

// ErrInvalidProfile: a depth is not positive.
var ErrInvalidProfile = errors.New("link: invalid queue profile")

// Conn is a queue pair and the completion queue it sends and receives on.
type Conn struct {
	QP rdma.QueuePair
	CQ rdma.CompletionQueue
}

// Open makes a completion queue and a reliable-connected queue pair on dev
// sized by p; the pair still has to be connected to its peer.
func Open(dev rdma.Device, p Profile) (Conn, error) { return open(dev, p, false) }

// OpenConfined is Open for a queue pair whose peer reaches only the
// regions granted to it (rdma.QPConfig.Confined), where dev can confine
// (rdma.Caps.GrantPerQP); elsewhere it is Open.
func OpenConfined(dev rdma.Device, p Profile) (Conn, error) {
	return open(dev, p, dev.Caps().GrantPerQP)
}

// tcpSendScale deepens a tcp queue pair's send queue. Its entries cost a
// few bytes (the payload is copied into the QP's send buffer at post time,
// so the writer's staging may be reused as soon as a WRITE is posted), and
// a queue of 256 runs dry within one acknowledgement's round trip, which a
// loaded host stretches to milliseconds: the stream then stops and starts
// with it. The CQ keeps its depth while it still holds every outstanding
// request's completion: with 32, a ring's send queue is as deep as its CQ
// (8192 requests, not 2048). A deeper queue lets one publisher's writes
// lag further behind another's; since the slot check covers the payload
// (layout version 3) a frame landing over a newer lap is an EventCorrupt,
// never a torn tick delivered, so the depth costs no correctness.
const tcpSendScale = 32

// tcpSendDepth is a tcp queue pair's send depth for p on a device whose
// queue pairs hold at most maxQP requests.
func tcpSendDepth(p Profile, maxQP int) int {
	return min(p.SendDepth*tcpSendScale, max(p.CQDepth, p.SendDepth), maxQP)
}

func open(dev rdma.Device, p Profile, confined bool) (Conn, error) {
	if p.SendDepth <= 0 || p.RecvDepth <= 0 || p.CQDepth <= 0 {
		return Conn{}, fmt.Errorf("%w: send %d, recv %d, cq %d, want all > 0", ErrInvalidProfile, p.SendDepth, p.RecvDepth, p.CQDepth)
	}
	if dev.Provider() == rdma.ProviderTCP {
		p.SendDepth = tcpSendDepth(p, dev.Caps().MaxQPDepth)
	}
	cq, err := dev.CreateCQ(p.CQDepth)
	if err != nil {
		return Conn{}, err
	}
	qp, err := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: p.SendDepth, RecvDepth: p.RecvDepth, Confined: confined})
	if err != nil {
		_ = cq.Close()
		return Conn{}, err
	}
	return Conn{QP: qp, CQ: cq}, nil
}

// Close closes the queue pair, then its completion queue. The zero Conn
// closes nothing.
func (c Conn) Close() error {
	var errs []error
	if c.QP != nil {
		errs = append(errs, c.QP.Close())
	}
	if c.CQ != nil {
		errs = append(errs, c.CQ.Close())
	}
	return errors.Join(errs...)
}

// Backoff is a retry policy: the first delay, doubled after each failed
// attempt up to Max; Attempts bounds the tries (0: until the caller stops).
type Backoff struct {
	First, Max time.Duration
	Attempts   int
}

// The policies of a connect to a peer.
var (
	// Connect: a publisher's first connect to a subscriber it was told of
	// (a busy host, a subscriber still starting): five tries, then the
	// publisher says once that the subscriber gets nothing from it.
	Connect = Backoff{First: 100 * time.Millisecond, Max: 1600 * time.Millisecond, Attempts: 5}
	// Reconnect: a queue pair failed while its peer is still on the bus:
	// retry until the peer leaves or the publisher closes.
	Reconnect = Backoff{First: 100 * time.Millisecond, Max: 2 * time.Second}
)

// Delay is the wait after failed attempt n (1-based).
func (b Backoff) Delay(n int) time.Duration {
	d := b.First
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// More reports whether attempt n (1-based) may be made.
func (b Backoff) More(n int) bool { return b.Attempts == 0 || n <= b.Attempts }
