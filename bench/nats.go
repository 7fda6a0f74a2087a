package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tickbus/tickbus/rdma"
)

// The nats case: NATS core pub/sub through a nats-server (the Go package,
// run in its own child process on loopback), a nats.go publisher and a
// nats.go subscriber in two more processes, each with its own connection,
// the same message bytes. A batched send is one NATS message carrying Batch
// ticks back to back (NATS has no batch publish; this is how a NATS user
// batches).

func init() {
	transports[CaseNATS] = transport{openTx: openNATSTx, openRx: openNATSRx}
}

// natsMaxPayload lets a batch of the largest ticks through in one message.
const natsMaxPayload = 16 << 20

func natsSubject(topic int) string { return fmt.Sprintf("tickbus.bench.%d", topic) }

// natsServerMain runs a nats-server on a random loopback port, reports its
// URL and serves until stdin closes.
func natsServerMain(args []string) int {
	out := os.Stdout
	opts := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		MaxPayload: natsMaxPayload, MaxPending: 4 * natsMaxPayload,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		_ = writeReport(out, report{Done: true, Err: err.Error()})
		return 1
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		_ = writeReport(out, report{Done: true, Err: "nats-server not ready within 10s"})
		return 1
	}
	if err := writeReport(out, report{Ready: true, Info: s.ClientURL()}); err != nil {
		s.Shutdown()
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

func natsConnect(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.NoReconnect(), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("bench: nats connect %s: %w", url, err)
	}
	return nc, nil
}

type natsTx struct {
	nc    *nats.Conn
	subj  string
	buf   []byte
	size  int
	codec *msgCodec
}

func openNATSTx(a roleArgs, topic int) (txPort, error) {
	nc, err := natsConnect(a.url, "tickbus-bench-pub")
	if err != nil {
		return nil, err
	}
	return &natsTx{nc: nc, subj: natsSubject(topic), buf: make([]byte, a.size*a.batch), size: a.size, codec: newCodec()}, nil
}

func (t *natsTx) send(seq, ts, _ int64) error {
	m := t.buf[:t.size]
	t.codec.encode(m, seq, ts)
	return t.nc.Publish(t.subj, m)
}

func (t *natsTx) sendBatch(seq0 int64, n int, ts, _ int64) error {
	for i := range n {
		t.codec.encode(t.buf[i*t.size:], seq0+int64(i), ts)
	}
	return t.nc.Publish(t.subj, t.buf[:n*t.size])
}

func (t *natsTx) close() error {
	if t.nc == nil {
		return nil
	}
	err := t.nc.FlushTimeout(5 * time.Second)
	t.nc.Close()
	t.nc = nil
	return err
}

type natsRx struct {
	nc      *nats.Conn
	sub     *nats.Subscription
	ch      chan *nats.Msg
	cur     []byte
	size    int
	scratch []byte
	codec   *msgCodec
	idle    rdma.IdleStrategy
}

func openNATSRx(a roleArgs, topic int) (rxPort, error) {
	nc, err := natsConnect(a.url, "tickbus-bench-sub")
	if err != nil {
		return nil, err
	}
	r := &natsRx{nc: nc, ch: make(chan *nats.Msg, 1<<16), size: a.size, scratch: make([]byte, a.size), codec: newCodec()}
	r.idle, _ = rdma.ParseIdle(a.idle)
	if r.sub, err = nc.ChanSubscribe(natsSubject(topic), r.ch); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: nats subscribe: %w", err)
	}
	// The interest is at the server before we say we are ready.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bench: nats flush: %w", err)
	}
	return r, nil
}

func (r *natsRx) next(deadline int64) (int64, int64, error) {
	for spins := 0; len(r.cur) < r.size; spins++ {
		select {
		case m := <-r.ch:
			if len(m.Data)%r.size != 0 {
				return 0, 0, fmt.Errorf("bench: nats message of %d bytes, want a multiple of %d", len(m.Data), r.size)
			}
			r.cur = m.Data
		default:
			r.idle.Idle(0)
			if spins&255 == 255 && nanotime() > deadline {
				return 0, 0, ErrDeadline
			}
		}
	}
	r.idle.Reset() // received: a time-based strategy spins again
	copy(r.scratch, r.cur[:r.size])
	r.cur = r.cur[r.size:]
	return r.codec.decode(r.scratch)
}

func (r *natsRx) close() error {
	if r.nc == nil {
		return nil
	}
	var err error
	if dropped, derr := r.sub.Dropped(); derr == nil && dropped > 0 {
		err = fmt.Errorf("bench: nats subscriber dropped %d messages (slow consumer)", dropped)
	}
	r.nc.Close()
	r.nc = nil
	return err
}

// natsCase runs a nats-server child for the case's lifetime.
type natsCase struct {
	pairCase
	server *proc
}

func (c *natsCase) setup(ctx context.Context, _ Config) error {
	c.transport = CaseNATS
	// The server must outlive ctx's callers' runs, not a single run.
	p, err := startProc(context.WithoutCancel(ctx), "nats-server", roleNATS, nil, nil)
	if err != nil {
		return err
	}
	c.server = p
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	r, err := p.ready(rctx)
	if err != nil {
		return errors.Join(err, c.close())
	}
	c.url = r.Info
	c.around = func(run func() (phase, error)) (phase, error) {
		before, err := procCPU(c.server.cmd.Process.Pid)
		if err != nil {
			return phase{}, err
		}
		ph, err := run()
		after, cerr := procCPU(c.server.cmd.Process.Pid)
		if cerr == nil {
			ph.cpu += after - before
			ph.cores++
		}
		return ph, errors.Join(err, cerr)
	}
	return nil
}

func (c *natsCase) close() error {
	if c.server == nil {
		return nil
	}
	_, err := c.server.stop(5 * time.Second)
	c.server = nil
	return err
}
