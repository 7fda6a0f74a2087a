package tcpbench_test

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// The benchmarks put the tcp provider beside NATS core over the same link
// in the same run, and report the ratio. Latency is a closed-loop ping-pong
// (the next ping leaves only after the pong came back, so nothing queues):
// one-way latency is half the round trip. Pollers use rdma.Yield: this
// machine is shared.

const (
	benchMsg    = 64   // bytes per message in the throughput runs
	streamDepth = 4096 // send queue depth of the streaming side: requests in flight
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(10*time.Second), 3) }

func reportOneWay(b *testing.B, name string, h *hdrhistogram.Histogram) {
	b.ReportMetric(float64(h.ValueAtQuantile(50))/2, name+"-p50-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99))/2, name+"-p99-ns")
	b.ReportMetric(float64(h.ValueAtQuantile(99.9))/2, name+"-p99.9-ns")
}

// link says where the two ends of a benchmark live: both devices' listen
// addresses, and the NATS server's.
type link struct {
	name      string
	cfgA      tcp.Config
	cfgB      tcp.Config
	natsHost  string
	natsReach string // how clients reach the server; "" means natsHost
}

var loopback = link{name: "loopback", natsHost: "127.0.0.1"}

// tcpPingPong measures n round trips: A writes i into B's ping word, B's
// goroutine sees it and writes i into A's pong word. Both writes are
// 8-byte inline WRITEs, signalled every 32nd so the send queue retires.
func tcpPingPong(b *testing.B, l link, n int) *hdrhistogram.Histogram {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(b, openDevice(b, l.cfgA), 128, all)
	bb := newSide(b, openDevice(b, l.cfgB), 128, all)
	connect(b, a, bb)
	ping, pong := word64(bb.MR.Bytes()), word64(a.MR.Bytes())
	atomic.StoreUint64(ping, 0)
	atomic.StoreUint64(pong, 0)

	var stop atomic.Bool
	errc := make(chan error, 1)
	go func() { errc <- echoTo(bb, remote(a.MR, 0), ping, &stop) }()

	h := newHist()
	var buf [8]byte
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Remote: remote(bb.MR, 0)}
	var cs [16]rdma.Completion
	idle := benchIdle()
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		binary.NativeEndian.PutUint64(buf[:], uint64(i))
		wr.Inline = buf[:]
		wr.Flags = rdma.FlagInline
		if i%32 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		t0 := time.Now()
		for {
			err := a.QP.PostSend(&wr)
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				b.Fatal(err)
			}
			a.CQ.Poll(cs[:])
		}
		for atomic.LoadUint64(pong) != uint64(i) { // pairs with the responder's atomic 8-byte store
			k := a.CQ.Poll(cs[:])
			for _, c := range cs[:k] {
				if c.Status != rdma.StatusSuccess {
					b.Fatalf("ping completed %s", c.Status)
				}
			}
			idle.Idle(k)
		}
		idle.Reset() // the pong is work: a time-based strategy spins again
		h.RecordValue(int64(time.Since(t0)))
	}
	b.StopTimer()
	stop.Store(true)
	require.NoError(b, <-errc)
	return h
}

// echoTo is B's side of the ping-pong: every new ping value goes back to
// A's pong word at dst.
func echoTo(s *side, dst rdma.RemoteAddr, ping *uint64, stop *atomic.Bool) error {
	var buf [8]byte
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Remote: dst}
	var cs [16]rdma.Completion
	idle := benchIdle()
	last := uint64(0)
	for !stop.Load() {
		v := atomic.LoadUint64(ping)
		k := s.CQ.Poll(cs[:])
		for _, c := range cs[:k] {
			if c.Status != rdma.StatusSuccess {
				return errors.New("pong completed " + c.Status.String())
			}
		}
		if v == last {
			idle.Idle(k)
			continue
		}
		idle.Reset()
		last = v
		binary.NativeEndian.PutUint64(buf[:], v)
		wr.Inline = buf[:]
		wr.Flags = rdma.FlagInline
		if v%32 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		for {
			err := s.QP.PostSend(&wr)
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				return err
			}
			s.CQ.Poll(cs[:])
		}
	}
	return nil
}

// startNATS runs an embedded nats-server for the benchmark.
func startNATS(b *testing.B, l link) string {
	opts := &server.Options{Host: l.natsHost, Port: server.RANDOM_PORT, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	require.NoError(b, err)
	go s.Start()
	require.True(b, s.ReadyForConnections(10*time.Second), "nats-server not ready")
	b.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

func natsConn(b *testing.B, url string) *nats.Conn {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	return nc
}

// natsPingPong measures n round trips through NATS core: A publishes on
// ping, B's handler republishes on pong, A waits for it.
func natsPingPong(b *testing.B, l link, n int) *hdrhistogram.Histogram {
	url := startNATS(b, l)
	ncA, ncB := natsConn(b, url), natsConn(b, url)
	_, err := ncB.Subscribe("bench.ping", func(m *nats.Msg) { ncB.Publish("bench.pong", m.Data) })
	require.NoError(b, err)
	require.NoError(b, ncB.Flush())
	sub, err := ncA.SubscribeSync("bench.pong")
	require.NoError(b, err)
	require.NoError(b, ncA.Flush())
	h := newHist()
	var buf [8]byte
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		binary.NativeEndian.PutUint64(buf[:], uint64(i))
		t0 := time.Now()
		require.NoError(b, ncA.Publish("bench.ping", buf[:]))
		m, err := sub.NextMsg(10 * time.Second)
		require.NoError(b, err)
		require.Equal(b, uint64(i), binary.NativeEndian.Uint64(m.Data))
		h.RecordValue(int64(time.Since(t0)))
	}
	b.StopTimer()
	return h
}

func benchLatency(b *testing.B, l link) {
	b.ReportAllocs()
	th := tcpPingPong(b, l, b.N)
	nh := natsPingPong(b, l, b.N)
	reportOneWay(b, "tcp", th)
	reportOneWay(b, "nats", nh)
	b.ReportMetric(float64(nh.ValueAtQuantile(50))/float64(th.ValueAtQuantile(50)), "nats/tcp-p50")
	b.ReportMetric(float64(nh.ValueAtQuantile(99))/float64(th.ValueAtQuantile(99)), "nats/tcp-p99")
}

// BenchmarkLatency_TCPvsNATS: one-way latency of an 8-byte message, tcp
// provider WRITE vs NATS core publish, over loopback, in one run.
func BenchmarkLatency_TCPvsNATS(b *testing.B) { benchLatency(b, loopback) }

// tcpStream writes n 64-byte messages from A into a 64-slot ring at B,
// signalling every 64th, and returns the rate once the last is
// acknowledged.
func tcpStream(b *testing.B, l link, n int) float64 {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(b, openDevice(b, l.cfgA), streamDepth, all)
	bb := newSide(b, openDevice(b, l.cfgB), streamDepth, all)
	connect(b, a, bb)
	var cs [64]rdma.Completion
	idle := benchIdle()
	check := func(k int) {
		for _, c := range cs[:k] {
			if c.Status != rdma.StatusSuccess {
				b.Fatalf("write completed %s", c.Status)
			}
		}
	}
	b.StartTimer()
	start := time.Now()
	wr := rdma.WorkRequest{Op: rdma.OpWrite}
	for i := 0; i < n; i++ {
		slot := (i % 64) * benchMsg
		wr.ID = uint64(i)
		wr.Local = rdma.LocalSGE(a.MR, slot, benchMsg)
		wr.Remote = remote(bb.MR, slot)
		wr.Flags = 0
		if i%64 == 63 || i == n-1 {
			wr.Flags = rdma.FlagSignaled
		}
		for {
			err := a.QP.PostSend(&wr)
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				b.Fatal(err)
			}
			k := a.CQ.Poll(cs[:])
			check(k)
			idle.Idle(k)
		}
	}
	for done := false; !done; {
		k := a.CQ.Poll(cs[:])
		check(k)
		for _, c := range cs[:k] {
			done = done || c.ID == uint64(n-1)
		}
		idle.Idle(k)
	}
	el := time.Since(start)
	b.StopTimer()
	return float64(n) / el.Seconds()
}

// natsStream publishes n 64-byte messages and returns the rate once the
// subscriber has them all.
func natsStream(b *testing.B, l link, n int) float64 {
	url := startNATS(b, l)
	ncA, ncB := natsConn(b, url), natsConn(b, url)
	var got atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	sub, err := ncB.Subscribe("bench.stream", func(*nats.Msg) {
		if got.Add(1) == int64(n) {
			once.Do(func() { close(done) })
		}
	})
	require.NoError(b, err)
	require.NoError(b, sub.SetPendingLimits(-1, -1))
	require.NoError(b, ncB.Flush())
	msg := make([]byte, benchMsg)
	b.StartTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ncA.Publish("bench.stream", msg); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, ncA.Flush())
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatalf("nats subscriber got %d of %d", got.Load(), n)
	}
	el := time.Since(start)
	b.StopTimer()
	if d, _ := sub.Dropped(); d != 0 {
		b.Fatalf("nats dropped %d messages", d)
	}
	return float64(n) / el.Seconds()
}

// benchThroughput times both streams (each starts and stops the timer
// around its own loop), so the framework's ns/op, from which it picks the
// next b.N, is both of them: a ResetTimer in the second once hid the first,
// and b.N grew until a run took minutes.
func benchThroughput(b *testing.B, l link) {
	b.ReportAllocs()
	b.StopTimer()
	t := tcpStream(b, l, b.N)
	nr := natsStream(b, l, b.N)
	b.ReportMetric(t, "tcp-msgs/s")
	b.ReportMetric(nr, "nats-msgs/s")
	b.ReportMetric(t/nr, "tcp/nats")
}

// BenchmarkThroughput_TCPvsNATS: 64-byte messages, tcp provider WRITEs
// (signalled every 64th) vs NATS core publish, over loopback, in one run.
func BenchmarkThroughput_TCPvsNATS(b *testing.B) { benchThroughput(b, loopback) }

// benchIdle is the ends' idle strategy: TICKBUS_BENCH_IDLE (spin, yield,
// backoff, adaptive), by default the product's default (adaptive), so the
// figures are those of what users run; yield if the name is not known.
func benchIdle() rdma.IdleStrategy {
	s, err := rdma.ParseIdle(os.Getenv("TICKBUS_BENCH_IDLE"))
	if err != nil {
		return rdma.Yield{}
	}
	return s
}
