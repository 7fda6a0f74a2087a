package shm_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

func init() {
	child.Register("shm-peer", peerMain)
}

// peerMain: args [allowUID]. Opens a device (allowing allowUID if given),
// a QP and a region; prints "EP <hex>" and "MR <hex>"; reads one line
// "<hex endpoint>", connects to it, prints "OK" or "ERR <error>"; then
// holds everything until stdin closes.
func peerMain(args []string) int {
	var cfg shm.Config
	if len(args) > 0 {
		uid, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			fmt.Println("ERR", err)
			return 2
		}
		cfg.AllowUIDs = []uint32{uint32(uid)}
	}
	d, err := shm.Open(cfg)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer d.Close()
	cq, _ := d.CreateCQ(16)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 4})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	mr, err := d.RegisterMemory(1<<20, rdma.AccessRemote)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	ep, _ := qp.LocalEndpoint().MarshalBinary()
	rr, _ := mr.Remote().MarshalBinary()
	fmt.Printf("EP %x\nMR %x\n", ep, rr)
	sc := bufio.NewScanner(os.Stdin)
	if !sc.Scan() {
		return 0
	}
	var rep rdma.Endpoint
	raw, err := hex.DecodeString(sc.Text())
	if err == nil {
		err = rep.UnmarshalBinary(raw)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = qp.Connect(ctx, rep)
		cancel()
	}
	if err != nil {
		fmt.Println("ERR", err)
	} else {
		fmt.Println("OK")
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

type peer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	ep    rdma.Endpoint
	mr    rdma.RemoteRegion
}

// startShmPeer runs peerMain in cmd (prepared by the caller) and reads its
// endpoint and region.
func startShmPeer(t *testing.T, cmd *exec.Cmd) *peer {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &peer{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := func(prefix string) []byte {
		require.True(t, p.out.Scan(), "peer exited")
		require.True(t, strings.HasPrefix(p.out.Text(), prefix), "peer said %q", p.out.Text())
		b, err := hex.DecodeString(strings.TrimPrefix(p.out.Text(), prefix))
		require.NoError(t, err)
		return b
	}
	require.NoError(t, p.ep.UnmarshalBinary(line("EP ")))
	require.NoError(t, p.mr.UnmarshalBinary(line("MR ")))
	return p
}

// connectPeer sends our endpoint and connects our side; it returns the
// peer's answer ("OK" or "ERR …") and our Connect's error.
func (p *peer) connect(t *testing.T, qp rdma.QueuePair) (string, error) {
	t.Helper()
	b, err := qp.LocalEndpoint().MarshalBinary()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ourErr := qp.Connect(ctx, p.ep)
	_, err = fmt.Fprintf(p.stdin, "%x\n", b)
	require.NoError(t, err)
	require.True(t, p.out.Scan(), "peer exited")
	return p.out.Text(), ourErr
}

func newQP(t *testing.T, d rdma.Device) (rdma.QueuePair, rdma.CompletionQueue) {
	t.Helper()
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 4})
	require.NoError(t, err)
	return qp, cq
}

// TestPeerCredentials_OtherUID_RefusedUnlessAllowed runs the peer as uid
// 65534 (nobody): refused by default, accepted when allowed, and the peer
// refuses us (root) unless it allows uid 0.
func TestPeerCredentials_OtherUID_RefusedUnlessAllowed(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a peer process under another uid")
	}
	const nobody = 65534
	// The test binary must be executable by nobody: copy it out of the
	// private build directory.
	dir, err := os.MkdirTemp("", "tickbus-shm-cred-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "peer.test")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	run := func(args ...string) *peer {
		cmd := exec.Command(bin, append([]string{"--"}, args...)...)
		cmd.Env = append(os.Environ(), child.EnvRole+"=shm-peer")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		return startShmPeer(t, cmd)
	}

	t.Run("NotAllowed_Refused", func(t *testing.T) {
		d, err := shm.Open(shm.Config{})
		require.NoError(t, err)
		defer d.Close()
		qp, _ := newQP(t, d)
		p := run("0") // the peer allows us; we do not allow it
		answer, ourErr := p.connect(t, qp)
		assert.ErrorIs(t, ourErr, shm.ErrPeerCredentials, "we refuse to map memory from uid %d", nobody)
		assert.True(t, strings.HasPrefix(answer, "ERR"), "the peer's connect to us is refused: %s", answer)
	})
	t.Run("Allowed_Connects", func(t *testing.T) {
		d, err := shm.Open(shm.Config{AllowUIDs: []uint32{nobody}})
		require.NoError(t, err)
		defer d.Close()
		qp, cq := newQP(t, d)
		p := run("0")
		answer, ourErr := p.connect(t, qp)
		require.NoError(t, ourErr)
		require.Equal(t, "OK", answer)
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("hi"), Remote: rdma.RemoteAddr{Addr: p.mr.Addr, RKey: p.mr.RKey}}
		require.NoError(t, qp.PostSend(&wr))
		buf := make([]rdma.Completion, 1)
		require.Eventually(t, func() bool { return cq.Poll(buf) == 1 }, 5*time.Second, time.Millisecond)
		assert.Equal(t, rdma.StatusSuccess, buf[0].Status)
	})
	t.Run("PeerDoesNotAllowUs_Refused", func(t *testing.T) {
		d, err := shm.Open(shm.Config{AllowUIDs: []uint32{nobody}})
		require.NoError(t, err)
		defer d.Close()
		qp, _ := newQP(t, d)
		p := run() // allows only its own uid, not root
		answer, ourErr := p.connect(t, qp)
		assert.Error(t, ourErr, "the peer closes our connection after its check")
		assert.Contains(t, answer, shm.ErrPeerCredentials.Error())
	})
}

// memfdMaps counts this process's mappings of tickbus memfds.
func memfdMaps(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "memfd:tickbus-")
}

func listDir(t *testing.T, dir string) map[string]bool {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

// TestPeerKilled_NothingLeftBehind SIGKILLs a connected peer process: our
// QP moves to ERR and unmaps the peer's memory, and nothing of the peer is
// left in /dev/shm, the temp dir or the socket table.
func TestPeerKilled_NothingLeftBehind(t *testing.T) {
	// The peer gets a temp dir of its own: CI runs every package at once,
	// and the shared one fills with other packages' files meanwhile.
	peerTmp := t.TempDir()
	shmBefore := listDir(t, "/dev/shm")
	d, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer d.Close()
	qp, cq := newQP(t, d)
	mapsBefore := memfdMaps(t)

	cmd, err := child.Command(context.Background(), "shm-peer")
	require.NoError(t, err)
	cmd.Env = append(cmd.Env, "TMPDIR="+peerTmp)
	p := startShmPeer(t, cmd)
	answer, ourErr := p.connect(t, qp)
	require.NoError(t, ourErr)
	require.Equal(t, "OK", answer)
	assert.Greater(t, memfdMaps(t), mapsBefore, "the peer's queue and region are mapped here")
	sock := fmt.Sprintf("@tickbus-shm-%d-", cmd.Process.Pid)
	unixTable := func() string {
		b, err := os.ReadFile("/proc/net/unix")
		require.NoError(t, err)
		return string(b)
	}
	assert.Contains(t, unixTable(), sock, "the peer listens on an abstract socket")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Eventually(t, func() bool { return qp.State() == rdma.QPError }, 5*time.Second, time.Millisecond, "peer death moves the QP to ERR")
	wr := rdma.WorkRequest{ID: 7, Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte("x"), Remote: rdma.RemoteAddr{Addr: p.mr.Addr, RKey: p.mr.RKey}}
	require.NoError(t, qp.PostSend(&wr))
	buf := make([]rdma.Completion, 1)
	require.Eventually(t, func() bool { return cq.Poll(buf) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, rdma.StatusFlushed, buf[0].Status)

	// ERR is stored first, then the peer's memory is unmapped once no post
	// runs: wait for it.
	assert.Eventually(t, func() bool { return memfdMaps(t) == mapsBefore }, 5*time.Second, time.Millisecond,
		"the dead peer's memory is unmapped here")
	assert.NotContains(t, unixTable(), sock, "no socket left")
	for name := range listDir(t, "/dev/shm") {
		if !shmBefore[name] {
			assert.NotContains(t, name, "tickbus", "left in /dev/shm")
		}
	}
	for name := range listDir(t, peerTmp) {
		assert.NotContains(t, name, "tickbus", "left in the peer's temp dir")
	}
}
