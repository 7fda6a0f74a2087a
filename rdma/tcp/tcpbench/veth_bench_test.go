package tcpbench_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/netns"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// The veth benchmarks run the far end in a child process inside a network
// namespace that this benchmark creates (internal/netns): root namespace ↔
// bridge ↔ veth ↔ namespace. The tcp far end answers pings and takes
// writes; the NATS far end is the nats-server plus a responder client, so
// both cases cross the veth twice per round trip and once per streamed
// message.

const (
	roleTCPFar  = "tcp-bench-far"
	roleNATSFar = "tcp-bench-nats-far"
	streamBase  = 8192 // throughput writes land here, clear of the ping word
)

func init() {
	child.Register(roleTCPFar, tcpFarMain)
	child.Register(roleNATSFar, natsFarMain)
}

func hexOf(m interface{ MarshalBinary() ([]byte, error) }) string {
	b, err := m.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// tcpFarMain: a tcp device listening on -host; prints "EP <hex>" and
// "MR <hex>", reads the parent's "EP <hex>" and "MR <hex>", connects and
// echoes pings (or, with -sink, only takes writes) until stdin closes.
func tcpFarMain(args []string) int {
	fs := flag.NewFlagSet(roleTCPFar, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "listen address")
	sink := fs.Bool("sink", false, "take writes, answer no pings")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Printf("ERR %v\n", err); return 1 }
	d, err := tcp.Open(tcp.Config{HostID: "far", Listen: net.JoinHostPort(*host, "0")})
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	cq, err := d.CreateCQ(1024)
	if err != nil {
		return fail(err)
	}
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 128})
	if err != nil {
		return fail(err)
	}
	mr, err := d.RegisterMemory(1<<16, rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("EP %s\nMR %s\n", hexOf(qp.LocalEndpoint()), hexOf(mr.Remote()))
	in := bufio.NewScanner(os.Stdin)
	var ep rdma.Endpoint
	var rr rdma.RemoteRegion
	for _, dst := range []interface{ UnmarshalBinary([]byte) error }{&ep, &rr} {
		if !in.Scan() {
			return fail(errors.New("stdin closed before the parent's endpoint and region"))
		}
		_, h, _ := strings.Cut(in.Text(), " ")
		b, err := hex.DecodeString(h)
		if err == nil {
			err = dst.UnmarshalBinary(b)
		}
		if err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := qp.Connect(ctx, ep); err != nil {
		return fail(err)
	}
	fmt.Println("OK")
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	if *sink {
		for !stop.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		return 0
	}
	s := &side{Dev: d, CQ: cq, QP: qp, MR: mr}
	if err := echoTo(s, rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}, word64(mr.Bytes()), &stop); err != nil {
		return fail(err)
	}
	return 0
}

// natsFarMain: a nats-server on -host plus a client that answers
// bench.ping on bench.pong, counts bench.stream and answers bench.count n
// once it has n messages. Prints "URL <url>"; serves until stdin closes.
func natsFarMain(args []string) int {
	fs := flag.NewFlagSet(roleNATSFar, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Printf("ERR %v\n", err); return 1 }
	s, err := server.NewServer(&server.Options{Host: *host, Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		return fail(err)
	}
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		return fail(errors.New("nats-server not ready"))
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	var got atomic.Int64
	subs := []struct {
		subj string
		h    nats.MsgHandler
	}{
		{"bench.ping", func(m *nats.Msg) { nc.Publish("bench.pong", m.Data) }},
		{"bench.stream", func(*nats.Msg) { got.Add(1) }},
		{"bench.count", func(m *nats.Msg) {
			n, _ := strconv.ParseInt(string(m.Data), 10, 64)
			deadline := time.Now().Add(60 * time.Second)
			for got.Load() < n && time.Now().Before(deadline) {
				time.Sleep(100 * time.Microsecond)
			}
			m.Respond([]byte(strconv.FormatInt(got.Swap(0), 10)))
		}},
	}
	for _, sb := range subs {
		sub, err := nc.Subscribe(sb.subj, sb.h)
		if err != nil {
			return fail(err)
		}
		sub.SetPendingLimits(-1, -1)
	}
	if err := nc.Flush(); err != nil {
		return fail(err)
	}
	fmt.Printf("URL %s\n", s.ClientURL())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// far is a child process in the namespace.
type far struct {
	in  io.WriteCloser
	out *bufio.Scanner
	cmd *exec.Cmd
}

func startFar(b *testing.B, n *netns.Net, role string, args ...string) *far {
	base, err := child.Command(context.Background(), role, args...)
	require.NoError(b, err)
	cmd := n.Command(context.Background(), 0, base.Path, base.Args[1:]...)
	cmd.Env = base.Env
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(b, err)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	f := &far{in: in, out: bufio.NewScanner(out), cmd: cmd}
	b.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return f
}

// line reads the far end's next line, which must start with want.
func (f *far) line(b *testing.B, want string) string {
	b.Helper()
	require.True(b, f.out.Scan(), "far end exited: %v", f.out.Err())
	rest, ok := strings.CutPrefix(f.out.Text(), want+" ")
	if !ok && f.out.Text() == want {
		return ""
	}
	require.True(b, ok, "far end said %q, want %s", f.out.Text(), want)
	return rest
}

func needNet(b *testing.B) *netns.Net {
	if err := netns.Available(); err != nil {
		b.Skipf("needs network namespaces for a veth link: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := netns.New(ctx, netns.Config{Hosts: 1})
	require.NoError(b, err)
	b.Cleanup(func() { n.Close() })
	return n
}

// tcpToFar connects a local side (listening on the bridge) to a far tcp
// end and returns the side and the far region.
func tcpToFar(b *testing.B, n *netns.Net, sink bool) (*side, rdma.RemoteRegion) {
	args := []string{"-host", n.Hosts[0].Addr}
	if sink {
		args = append(args, "-sink")
	}
	f := startFar(b, n, roleTCPFar, args...)
	var ep rdma.Endpoint
	var rr rdma.RemoteRegion
	for _, x := range []struct {
		tag string
		dst interface{ UnmarshalBinary([]byte) error }
	}{{"EP", &ep}, {"MR", &rr}} {
		h, err := hex.DecodeString(f.line(b, x.tag))
		require.NoError(b, err)
		require.NoError(b, x.dst.UnmarshalBinary(h))
	}
	a := newSide(b, openDevice(b, tcp.Config{Listen: net.JoinHostPort(n.Gateway, "0")}), streamDepth, rdma.AccessLocalWrite|rdma.AccessRemote)
	_, err := fmt.Fprintf(f.in, "EP %s\nMR %s\n", hexOf(a.QP.LocalEndpoint()), hexOf(a.MR.Remote()))
	require.NoError(b, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(b, a.QP.Connect(ctx, ep))
	f.line(b, "OK")
	return a, rr
}

func natsToFar(b *testing.B, n *netns.Net) *nats.Conn {
	f := startFar(b, n, roleNATSFar, "-host", n.Hosts[0].Addr)
	return natsConn(b, f.line(b, "URL"))
}

// BenchmarkLatencyVeth_TCPvsNATS: one-way latency of an 8-byte message
// across a veth link into another network namespace, tcp provider WRITE vs
// NATS core, in one run.
func BenchmarkLatencyVeth_TCPvsNATS(b *testing.B) {
	n := needNet(b)
	b.ReportAllocs()
	a, rr := tcpToFar(b, n, false)
	th := pingFar(b, a, rr, b.N)
	nc := natsToFar(b, n)
	nh := natsPingFar(b, nc, b.N)
	reportOneWay(b, "tcp", th)
	reportOneWay(b, "nats", nh)
	b.ReportMetric(float64(nh.ValueAtQuantile(50))/float64(th.ValueAtQuantile(50)), "nats/tcp-p50")
	b.ReportMetric(float64(nh.ValueAtQuantile(99))/float64(th.ValueAtQuantile(99)), "nats/tcp-p99")
}

func pingFar(b *testing.B, a *side, rr rdma.RemoteRegion, n int) *hdrhistogram.Histogram {
	pong := word64(a.MR.Bytes())
	h := newHist()
	var buf [8]byte
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}}
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
		postRetry(b, a, &wr, cs[:])
		for atomic.LoadUint64(pong) != uint64(i) { // pairs with the far end's atomic 8-byte store
			k := a.CQ.Poll(cs[:])
			checkOK(b, cs[:k])
			idle.Idle(k)
		}
		idle.Reset() // the pong is work: a time-based strategy spins again
		h.RecordValue(int64(time.Since(t0)))
	}
	b.StopTimer()
	return h
}

func postRetry(b *testing.B, a *side, wr *rdma.WorkRequest, cs []rdma.Completion) {
	for {
		err := a.QP.PostSend(wr)
		if err == nil {
			return
		}
		if !errors.Is(err, rdma.ErrSendQueueFull) {
			b.Fatal(err)
		}
		checkOK(b, cs[:a.CQ.Poll(cs)])
	}
}

func checkOK(b *testing.B, cs []rdma.Completion) {
	for _, c := range cs {
		if c.Status != rdma.StatusSuccess {
			b.Fatalf("%s completed %s", c.Op, c.Status)
		}
	}
}

func natsPingFar(b *testing.B, nc *nats.Conn, n int) *hdrhistogram.Histogram {
	sub, err := nc.SubscribeSync("bench.pong")
	require.NoError(b, err)
	require.NoError(b, nc.Flush())
	h := newHist()
	var buf [8]byte
	b.ResetTimer()
	for i := 1; i <= n; i++ {
		binary.NativeEndian.PutUint64(buf[:], uint64(i))
		t0 := time.Now()
		require.NoError(b, nc.Publish("bench.ping", buf[:]))
		m, err := sub.NextMsg(10 * time.Second)
		require.NoError(b, err)
		require.Equal(b, uint64(i), binary.NativeEndian.Uint64(m.Data))
		h.RecordValue(int64(time.Since(t0)))
	}
	b.StopTimer()
	return h
}

// BenchmarkThroughputVeth_TCPvsNATS: 64-byte messages across a veth link,
// tcp provider WRITEs (signalled every 64th) vs NATS core publish to a
// subscriber in the far namespace, in one run.
func BenchmarkThroughputVeth_TCPvsNATS(b *testing.B) {
	n := needNet(b)
	b.ReportAllocs()
	a, rr := tcpToFar(b, n, true)
	var cs [64]rdma.Completion
	idle := benchIdle()
	wr := rdma.WorkRequest{Op: rdma.OpWrite}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		slot := streamBase + (i%64)*benchMsg
		wr.ID = uint64(i)
		wr.Local = rdma.LocalSGE(a.MR, slot, benchMsg)
		wr.Remote = rdma.RemoteAddr{Addr: rr.Addr + uint64(slot), RKey: rr.RKey}
		wr.Flags = 0
		if i%64 == 63 || i == b.N-1 {
			wr.Flags = rdma.FlagSignaled
		}
		postRetry(b, a, &wr, cs[:])
	}
	for done := false; !done; {
		k := a.CQ.Poll(cs[:])
		checkOK(b, cs[:k])
		for _, c := range cs[:k] {
			done = done || c.ID == uint64(b.N-1)
		}
		idle.Idle(k)
	}
	tcpRate := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()

	nc := natsToFar(b, n)
	msg := make([]byte, benchMsg)
	b.StartTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		if err := nc.Publish("bench.stream", msg); err != nil {
			b.Fatal(err)
		}
	}
	reply, err := nc.Request("bench.count", []byte(strconv.Itoa(b.N)), 70*time.Second)
	require.NoError(b, err)
	natsRate := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	require.Equal(b, strconv.Itoa(b.N), string(reply.Data), "far subscriber's count")
	b.ReportMetric(tcpRate, "tcp-msgs/s")
	b.ReportMetric(natsRate, "nats-msgs/s")
	b.ReportMetric(tcpRate/natsRate, "tcp/nats")
}
