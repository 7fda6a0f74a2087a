package bus_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/child"
)

// Roles run in separate processes of this test binary.
func init() {
	child.Register("bus-natsd", natsdMain)
	child.Register("bus-node", nodeMain)
}

// natsdMain runs a nats-server (the nats-server Go package, as the
// nats-server command does) until SIGTERM/SIGKILL or stdin closes.
func natsdMain(args []string) int {
	fs := flag.NewFlagSet("bus-natsd", flag.ContinueOnError)
	port := fs.Int("port", 0, "port")
	token := fs.String("token", "", "auth token")
	user := fs.String("user", "", "user")
	pass := fs.String("pass", "", "password")
	nkey := fs.String("nkey", "", "public nkey of the one user")
	cert := fs.String("cert", "", "TLS certificate")
	key := fs.String("key", "", "TLS key")
	ca := fs.String("ca", "", "CA that signs client certificates (verify)")
	operator := fs.String("operator", "", "operator JWT file (decentralised auth)")
	account := fs.String("account", "", "account JWT file, trusted through -operator")
	clusterPort := fs.Int("cluster", 0, "cluster (route) port; 0: no cluster")
	routes := fs.String("routes", "", "comma-separated route URLs to other servers")
	nojs := fs.Bool("nojs", false, "run without JetStream")
	store := fs.String("store", "", "JetStream store directory, the parent's (empty: a temporary one, removed on a clean exit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts := &server.Options{Host: "127.0.0.1", Port: *port, NoLog: true, NoSigs: true,
		Authorization: *token, Username: *user, Password: *pass, ServerName: fmt.Sprintf("test-%d", *port)}
	if !*nojs && *operator == "" { // the operator test's account JWT grants no JetStream
		dir := *store
		if dir == "" {
			tmp, err := os.MkdirTemp("", "tickbus-test-js-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		opts.JetStream, opts.StoreDir = true, dir
	}
	if *clusterPort != 0 {
		opts.Cluster = server.ClusterOpts{Name: "tickbus-test", Host: "127.0.0.1", Port: *clusterPort}
		if *routes != "" {
			opts.Routes = server.RoutesFromStr(*routes)
		}
	}
	if *operator != "" {
		if err := trustOperator(opts, *operator, *account); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if *nkey != "" {
		opts.Nkeys = []*server.NkeyUser{{Nkey: *nkey}}
	}
	if *cert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: *cert, KeyFile: *key, CaFile: *ca, Verify: *ca != ""})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, *ca != ""
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "not ready")
		return 1
	}
	fmt.Println("ready", s.ClientURL())
	waitForEnd()
	s.Shutdown()
	return 0
}

// nodeMain runs a bus node that subscribes to -topic as -sub.
func nodeMain(args []string) int {
	fs := flag.NewFlagSet("bus-node", flag.ContinueOnError)
	url := fs.String("url", "", "NATS URL")
	id := fs.String("id", "", "node id")
	topic := fs.String("topic", "", "topic to subscribe")
	sub := fs.String("sub", "", "subscriber id (subscribe to -topic)")
	pub := fs.Bool("pub", false, "publish -topic (and so become its home if first)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := testConfig(*id, *url)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n, err := bus.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var rec recorder
	if *sub != "" {
		if _, err := n.Subscribe(ctx, subSpec(*topic, *sub, &rec)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if *pub {
		if _, err := n.Publish(ctx, pubSpec(*topic, &rec)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println("ready", n.ID())
	waitForEnd()
	_ = n.Close()
	return 0
}

func waitForEnd() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	stdin := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(stdin)
	}()
	select {
	case <-sig:
	case <-stdin:
	}
}

// proc is a child process started by a test.
type proc struct {
	cmd  *exec.Cmd
	line string        // the "ready …" line
	done chan struct{} // closed when the process has been reaped
}

// startProc runs role with args and waits for its "ready" line. The child
// is killed at cleanup if still running.
func startProc(t *testing.T, role string, args ...string) *proc {
	t.Helper()
	cmd, err := child.Command(context.Background(), role, args...)
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	_, err = cmd.StdinPipe() // closed when the test process dies: the child exits
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	select {
	case l, ok := <-lines:
		require.True(t, ok, "%s exited before ready", role)
		p.line = l
	case <-time.After(30 * time.Second):
		p.kill()
		t.Fatalf("%s not ready after 30s", role)
	}
	return p
}

// kill sends SIGKILL and reaps the process; idempotent.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// freePort returns a loopback port free right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// startNatsd runs a nats-server process on port; extra args for auth.
func startNatsd(t *testing.T, port int, extra ...string) (*proc, string) {
	t.Helper()
	// the store is the test's (removed after the process is stopped): a
	// killed server never removes its own, and every run left
	// tickbus-test-js-* directories behind
	p := startProc(t, "bus-natsd", append([]string{"-port", strconv.Itoa(port), "-store", t.TempDir()}, extra...)...)
	return p, "nats://127.0.0.1:" + strconv.Itoa(port)
}

// trustOperator sets up operator mode: the operator JWT is trusted and the
// account JWT is served from memory.
func trustOperator(opts *server.Options, operatorFile, accountFile string) error {
	ob, err := os.ReadFile(operatorFile)
	if err != nil {
		return err
	}
	oc, err := jwt.DecodeOperatorClaims(string(ob))
	if err != nil {
		return err
	}
	ab, err := os.ReadFile(accountFile)
	if err != nil {
		return err
	}
	ac, err := jwt.DecodeAccountClaims(string(ab))
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	if err := res.Store(ac.Subject, string(ab)); err != nil {
		return err
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.AccountResolver = res
	return nil
}
