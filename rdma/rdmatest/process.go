package rdmatest

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
)

var processTests = []test{
	{"Atomics_RacingProcesses", testAtomicsRacingProcesses},
	{"PayloadThenStamp_FromAnotherProcess", testStampsFromProcess},
	{"PeerKilled_QPErrors_NothingHangs", testPeerKilled},
	{"SendAndWriteImm_AcrossProcesses", testSendAcrossProcesses},
}

// RegisterChildRoles registers the peer-process role the suite spawns for
// p. Call it once (in init or TestMain, before child.Main) in the
// provider's test binary:
//
//	func TestMain(m *testing.M) {
//		rdmatest.RegisterChildRoles(prov)
//		child.Main()
//		os.Exit(m.Run())
//	}
func RegisterChildRoles(p Provider) {
	child.Register(peerRole(p), func(args []string) int { return peerMain(p, os.Stdin, os.Stdout) })
}

func peerRole(p Provider) string { return "rdmatest-peer-" + p.Name }

// The peer process speaks a line protocol on stdin/stdout. On start it
// prints "EP <hex endpoint>" and "MR <hex remote region>" (a 4 KiB region
// with every right), then answers each command with one line, "OK …" or
// "ERR …":
//
//	CONNECT <hex endpoint>         connect its QP to ours
//	FAA <hex region> <n>           atomicRacer: n FAA and n CAS increments;
//	                               answers "OK <won values…>"
//	STAMPS <hex region> <rounds>   writeStamps into our region, pacing on
//	                               the progress we publish at seenOff
//	RECV <n>                       post n receives of 1 KiB
//	WAITRECV <n>                   wait for n receive completions; answers
//	                               "OK op:status:bytes:imm:hexdata …"
//
// It exits when stdin closes.
func peerMain(p Provider, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(out, "ERR %v\n", err)
		return 1
	}
	d, err := p.Open()
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	cq, err := d.CreateCQ(1024)
	if err != nil {
		return fail(err)
	}
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64, RecvDepth: 16})
	if err != nil {
		return fail(err)
	}
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		return fail(err)
	}
	local, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	if err != nil {
		return fail(err)
	}
	ep, _ := qp.LocalEndpoint().MarshalBinary()
	rr, _ := mr.Remote().MarshalBinary()
	fmt.Fprintf(out, "EP %x\nMR %x\n", ep, rr)
	rbuf, err := d.RegisterMemory(16*1024, rdma.AccessLocalWrite)
	if err != nil {
		return fail(err)
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			fmt.Fprintf(out, "ERR bad command %q\n", sc.Text())
			continue
		}
		arg := func(i int) (int, error) {
			if i >= len(f) {
				return 0, fmt.Errorf("missing argument %d", i)
			}
			return strconv.Atoi(f[i])
		}
		switch f[0] {
		case "CONNECT":
			var rep rdma.Endpoint
			raw, err := hex.DecodeString(f[1])
			if err == nil {
				err = rep.UnmarshalBinary(raw)
			}
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				err = qp.Connect(ctx, rep)
				cancel()
			}
			reply(out, err, "")
		case "FAA", "STAMPS":
			var r rdma.RemoteRegion
			raw, err := hex.DecodeString(f[1])
			if err == nil {
				err = r.UnmarshalBinary(raw)
			}
			n, aerr := arg(2)
			err = errors.Join(err, aerr)
			var rest strings.Builder
			if err == nil && f[0] == "FAA" {
				var won []uint64
				won, err = atomicRacer(qp, cq, local, r, n)
				for _, v := range won {
					rest.WriteString(" " + strconv.FormatUint(v, 10))
				}
			} else if err == nil {
				err = writeStamps(qp, cq, r, n, readerPace(qp, cq, local, 64, r))
			}
			reply(out, err, rest.String())
		case "RECV":
			n, err := arg(1)
			for i := 0; err == nil && i < n; i++ {
				err = qp.PostRecv(&rdma.RecvRequest{ID: uint64(1000 + i), Local: rdma.LocalSGE(rbuf, (i%16)*1024, 1024)})
			}
			reply(out, err, "")
		case "WAITRECV":
			// Answers one field per receive: op:status:bytes:imm:hex(data).
			n, err := arg(1)
			var rest strings.Builder
			for got := 0; err == nil && got < n; {
				var cs []rdma.Completion
				if cs, err = pollN(cq, 1, opTimeout); err != nil {
					break
				}
				c := cs[0]
				if c.Op != rdma.OpRecv && c.Op != rdma.OpRecvImm {
					continue
				}
				got++
				var data []byte
				if c.Op == rdma.OpRecv && c.Status == rdma.StatusSuccess && c.ID >= 1000 {
					off := int(c.ID-1000) % 16 * 1024
					data = rbuf.Bytes()[off : off+int(min(c.Bytes, 1024))]
				}
				fmt.Fprintf(&rest, " %d:%d:%d:%d:%x", c.Op, c.Status, c.Bytes, c.Imm, data)
			}
			reply(out, err, rest.String())
		default:
			fmt.Fprintf(out, "ERR unknown command %q\n", f[0])
		}
	}
	return 0
}

func reply(out io.Writer, err error, rest string) {
	if err != nil {
		fmt.Fprintf(out, "ERR %v\n", err)
		return
	}
	fmt.Fprintf(out, "OK%s\n", rest)
}

// peerProc is a running peer process.
type peerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	ep    rdma.Endpoint
	mr    rdma.RemoteRegion
	once  sync.Once
}

// startPeer spawns a peer process and reads its endpoint and region. The
// test's cleanup closes its stdin and, if it lingers, kills it.
func startPeer(t *testing.T, p Provider) *peerProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd, err := child.Command(ctx, peerRole(p))
	if err != nil {
		cancel()
		t.Skipf("rdmatest: cannot spawn peer processes (did TestMain call rdmatest.RegisterChildRoles and child.Main?): %v", err)
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	pp := &peerProc{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			pp.lines <- sc.Text()
		}
		close(pp.lines)
	}()
	t.Cleanup(func() {
		pp.stop()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(opTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
		cancel()
	})
	ep, err := hex.DecodeString(strings.TrimPrefix(pp.next(t), "EP "))
	require.NoError(t, err)
	require.NoError(t, pp.ep.UnmarshalBinary(ep))
	mr, err := hex.DecodeString(strings.TrimPrefix(pp.next(t), "MR "))
	require.NoError(t, err)
	require.NoError(t, pp.mr.UnmarshalBinary(mr))
	return pp
}

func (pp *peerProc) stop() { pp.once.Do(func() { _ = pp.stdin.Close() }) }

// next returns the next line the peer printed.
func (pp *peerProc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-pp.lines:
		require.True(t, ok, "peer process exited")
		return l
	case <-time.After(time.Minute):
		t.Fatal("peer process silent for a minute")
		return ""
	}
}

// send writes a command line.
func (pp *peerProc) send(t *testing.T, format string, args ...any) {
	t.Helper()
	_, err := fmt.Fprintf(pp.stdin, format+"\n", args...)
	require.NoError(t, err)
}

// ok reads a reply and requires "OK"; it returns the rest.
func (pp *peerProc) ok(t *testing.T) string {
	t.Helper()
	l := pp.next(t)
	require.True(t, strings.HasPrefix(l, "OK"), "peer: %s", l)
	return strings.TrimSpace(strings.TrimPrefix(l, "OK"))
}

func hexOf(t *testing.T, m interface{ MarshalBinary() ([]byte, error) }) string {
	t.Helper()
	b, err := m.MarshalBinary()
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// connectPeer makes a QP on d, connects both ways with pp's QP, and
// returns it with its CQ.
func connectPeer(t *testing.T, d rdma.Device, pp *peerProc) (rdma.QueuePair, rdma.CompletionQueue) {
	t.Helper()
	cq, err := d.CreateCQ(256)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64, RecvDepth: 4})
	require.NoError(t, err)
	pp.send(t, "CONNECT %s", hexOf(t, qp.LocalEndpoint()))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	require.NoError(t, qp.Connect(ctx, pp.ep))
	pp.ok(t)
	return qp, cq
}

func testAtomicsRacingProcesses(t *testing.T, p Provider) {
	procs := 2
	if testing.Short() {
		procs = 1
	}
	n := atomicRounds()
	d := openDevice(t, p)
	target, err := d.RegisterMemory(4096, rdma.AccessRemote|rdma.AccessLocalWrite)
	require.NoError(t, err)
	peers := make([]*peerProc, procs)
	for i := range peers {
		peers[i] = startPeer(t, p)
		connectPeer(t, d, peers[i])
	}
	// A loopback QP pair in this process races as well.
	lcq, err := d.CreateCQ(16)
	require.NoError(t, err)
	la, err := d.CreateQP(rdma.QPConfig{SendCQ: lcq, RecvCQ: lcq, SendDepth: 4})
	require.NoError(t, err)
	lb, err := d.CreateQP(rdma.QPConfig{SendCQ: lcq, RecvCQ: lcq, SendDepth: 4})
	require.NoError(t, err)
	connect(t, la, lb)
	llocal, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)

	for _, pp := range peers {
		pp.send(t, "FAA %s %d", hexOf(t, target.Remote()), n)
	}
	won, err := atomicRacer(la, lcq, llocal, target.Remote(), n)
	require.NoError(t, err)
	for _, pp := range peers {
		for _, f := range strings.Fields(pp.ok(t)) {
			v, err := strconv.ParseUint(f, 10, 64)
			require.NoError(t, err)
			won = append(won, v)
		}
	}
	total := (procs + 1) * n
	assert.Equal(t, uint64(total), u64(target.Bytes()[faaOff:]), "sum of fetch-and-adds from %d processes", procs+1)
	assert.Equal(t, uint64(total), u64(target.Bytes()[casOff:]), "CAS counter")
	checkWon(t, won, total)
}

func testStampsFromProcess(t *testing.T, p Provider) {
	d := openDevice(t, p)
	target, err := d.RegisterMemory(4096, rdma.AccessRemote|rdma.AccessLocalWrite)
	require.NoError(t, err)
	pp := startPeer(t, p)
	connectPeer(t, d, pp)
	rounds := stampRounds()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		seen := (*uint64)(unsafe.Pointer(&target.Bytes()[seenOff]))
		n, err := readStamps(target.Bytes(), uint64(rounds), func(s uint64) { atomic.StoreUint64(seen, s) })
		done <- result{n, err}
	}()
	<-started
	pp.send(t, "STAMPS %s %d", hexOf(t, target.Remote()), rounds)
	r := <-done
	require.NoError(t, r.err)
	checked := r.n
	pp.ok(t)
	t.Logf("%d rounds written by another process, reader checked %d distinct stamps", rounds, checked)
	assert.GreaterOrEqual(t, checked, rounds/256, "the writer waited for the reader every 256 rounds")
}

func testPeerKilled(t *testing.T, p Provider) {
	d := openDevice(t, p)
	pp := startPeer(t, p)
	qp, cq := connectPeer(t, d, pp)
	local, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 8), Remote: rdma.RemoteAddr{Addr: pp.mr.Addr, RKey: pp.mr.RKey}}
	require.NoError(t, qp.PostSend(&wr))
	require.Equal(t, rdma.StatusSuccess, waitN(t, cq, 1)[0].Status)

	require.NoError(t, pp.cmd.Process.Signal(syscall.SIGKILL))
	// Keep posting: sooner or later a request fails and the QP is in ERR.
	deadline := time.Now().Add(opTimeout)
	var last rdma.Completion
	for last.Status == rdma.StatusSuccess {
		require.True(t, time.Now().Before(deadline), "no failure within %v of the peer's death", opTimeout)
		wr.ID++
		if err := qp.PostSend(&wr); err != nil {
			require.True(t, errors.Is(err, rdma.ErrSendQueueFull), "PostSend: %v", err)
		}
		cs, err := pollN(cq, 1, opTimeout)
		require.NoError(t, err)
		last = cs[0]
		time.Sleep(time.Millisecond)
	}
	t.Logf("first failure after the peer died: %s", last.Status)
	waitState(t, qp, rdma.QPError)
	wr.ID = 999
	require.NoError(t, qp.PostSend(&wr))
	for {
		c := waitN(t, cq, 1)[0]
		if c.ID == 999 {
			assert.Equal(t, rdma.StatusFlushed, c.Status)
			return
		}
	}
}

func testSendAcrossProcesses(t *testing.T, p Provider) {
	d := openDevice(t, p)
	pp := startPeer(t, p)
	qp, cq := connectPeer(t, d, pp)
	pp.send(t, "RECV 4")
	pp.ok(t)
	local, err := d.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	copy(local.Bytes(), "from a buffer")
	wrs := []rdma.WorkRequest{
		{ID: 1, Op: rdma.OpSend, Flags: rdma.FlagInline, Inline: []byte("inline hello")},
		{ID: 2, Op: rdma.OpSend, Local: rdma.LocalSGE(local, 0, 13)},
		{ID: 3, Op: rdma.OpWriteImm, Flags: rdma.FlagInline, Inline: []byte("imm data"), Remote: rdma.RemoteAddr{Addr: pp.mr.Addr + 100, RKey: pp.mr.RKey}, Imm: 0xabcd},
		{ID: 4, Op: rdma.OpSend, Local: rdma.LocalSGE(local, 0, 1025)}, // longer than the receive
	}
	want := []rdma.Status{rdma.StatusSuccess, rdma.StatusSuccess, rdma.StatusSuccess, rdma.StatusRemoteInvalidRequest}
	for i, wr := range wrs {
		c := do(t, qp, cq, wr)
		assert.Equal(t, want[i], c.Status, "request %d", wr.ID)
	}
	pp.send(t, "WAITRECV 4")
	got := strings.Fields(pp.ok(t))
	require.Len(t, got, 4)
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	assert.Equal(t, fmt.Sprintf("%d:%d:12:0:%s", rdma.OpRecv, rdma.StatusSuccess, hx("inline hello")), got[0])
	assert.Equal(t, fmt.Sprintf("%d:%d:13:0:%s", rdma.OpRecv, rdma.StatusSuccess, hx("from a buffer")), got[1])
	assert.Equal(t, fmt.Sprintf("%d:%d:8:%d:", rdma.OpRecvImm, rdma.StatusSuccess, 0xabcd), got[2])
	assert.True(t, strings.HasPrefix(got[3], fmt.Sprintf("%d:%d:", rdma.OpRecv, rdma.StatusLocalLength)), "the receive of a too long SEND: %s", got[3])
}
