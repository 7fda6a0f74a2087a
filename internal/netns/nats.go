package netns

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tickbus/tickbus/internal/child"
)

// RoleNATSServer is the child role that runs one nats-server: the
// nats-server Go package in a process of its own, inside a namespace.
const RoleNATSServer = "netns-nats-server"

// NATS ports inside every host (each host has its own network stack).
const (
	NATSClientPort  = 4222
	NATSClusterPort = 6222
)

func init() { child.Register(RoleNATSServer, natsServerMain) }

// natsServerMain: -host, -name, -routes (comma-separated host addresses).
// It prints "READY <client url>" once it has a route to every peer (or
// "ERR <why>"), then serves until stdin closes.
func natsServerMain(args []string) int {
	fs := flag.NewFlagSet(RoleNATSServer, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	name := fs.String("name", "", "server name")
	routes := fs.String("routes", "", "comma-separated peer addresses")
	js := fs.String("js", "", "JetStream store directory, kept (empty: a temporary one, removed on exit)")
	noAdvertise := fs.Bool("noadvertise", false, "do not tell clients the cluster's other servers")
	if err := fs.Parse(args); err != nil {
		fmt.Printf("ERR %v\n", err)
		return 2
	}
	var peers []string
	if *routes != "" {
		peers = strings.Split(*routes, ",")
	}
	// JetStream: tickbus elects each topic's home in its key-value buckets.
	dir := *js
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tickbus-netns-js-")
		if err != nil {
			fmt.Printf("ERR JetStream store: %v\n", err)
			return 2
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	opts := &server.Options{
		ServerName: *name, Host: *host, Port: NATSClientPort, NoSigs: true, NoLog: os.Getenv("NETNS_NATS_LOG") == "",
		Cluster:   server.ClusterOpts{Name: "tickbus", Host: *host, Port: NATSClusterPort, NoAdvertise: *noAdvertise},
		JetStream: true, StoreDir: dir,
	}
	for _, p := range peers {
		u, err := url.Parse(fmt.Sprintf("nats-route://%s:%d", p, NATSClusterPort))
		if err != nil {
			fmt.Printf("ERR route %q: %v\n", p, err)
			return 2
		}
		opts.Routes = append(opts.Routes, u)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		return 1
	}
	if !opts.NoLog {
		s.ConfigureLogger()
	}
	go s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(20 * time.Second) {
		fmt.Println("ERR not ready for connections within 20s")
		return 1
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.NumRoutes() < len(peers) {
		if time.Now().After(deadline) {
			fmt.Printf("ERR %d of %d routes after 30s\n", s.NumRoutes(), len(peers))
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	// JetStream's meta group must have a leader before tickbus can elect
	// homes: wait for it, so that a host reported ready is ready for that.
	for len(peers) > 0 && !s.JetStreamIsCurrent() {
		if time.Now().After(deadline) {
			fmt.Printf("ERR JetStream meta group not current after 30s (enabled %v, clustered %v)\n", s.JetStreamEnabled(), s.JetStreamIsClustered())
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("READY %s\n", s.ClientURL())
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or dies
	return 0
}

// NATSServer is a nats-server process running in one host.
type NATSServer struct {
	Host int    // index in Net.Hosts
	URL  string // client URL, reachable from every host and the root namespace

	net   *Net
	peers []string
	opts  NATSOptions

	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan string // the first stdout line, then closed
	done  chan struct{}
	err   error // of Wait, after done

	mu      sync.Mutex // Stop, Kill and Restart
	stopped bool
	stopErr error
}

// NATSOptions shapes the servers StartNATSWith starts.
type NATSOptions struct {
	// JetStreamDir, if set, is where every server stores JetStream, each in
	// its own subdirectory named after its host (kept across Restart, so a
	// restarted server recovers its state as a real one does); the caller
	// removes it. Empty: each server uses a temporary directory it removes
	// on exit.
	JetStreamDir string
	// NoAdvertise: clients are not told the cluster's other servers, so a
	// node whose server dies stays away from NATS until it is back (a host
	// cut off from the rest of the control plane).
	NoAdvertise bool
}

// StartNATS starts a nats-server in each of hosts (every host if empty),
// routed to one another as one cluster, and returns once each has a route
// to every other. On error the ones started are stopped.
func (n *Net) StartNATS(ctx context.Context, hosts ...int) ([]*NATSServer, error) {
	return n.StartNATSWith(ctx, NATSOptions{}, hosts...)
}

// StartNATSWith is StartNATS with options (JetStream).
func (n *Net) StartNATSWith(ctx context.Context, o NATSOptions, hosts ...int) ([]*NATSServer, error) {
	if len(hosts) == 0 {
		for i := range n.Hosts {
			hosts = append(hosts, i)
		}
	}
	var servers []*NATSServer
	stopAll := func() error {
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Stop())
		}
		return errors.Join(errs...)
	}
	for _, i := range hosts {
		if i < 0 || i >= len(n.Hosts) {
			return nil, errors.Join(fmt.Errorf("netns: no host %d", i), stopAll())
		}
		var peers []string
		for _, j := range hosts {
			if j != i {
				peers = append(peers, n.Hosts[j].Addr)
			}
		}
		s := &NATSServer{Host: i, net: n, peers: peers, opts: o}
		err := s.start(ctx)
		if err != nil {
			return nil, errors.Join(err, stopAll())
		}
		servers = append(servers, s)
	}
	for _, s := range servers {
		if err := s.waitReady(ctx); err != nil {
			return nil, errors.Join(err, stopAll())
		}
	}
	return servers, nil
}

// start runs s's process (the first time, or again after Restart killed it).
func (s *NATSServer) start(ctx context.Context) error {
	n, i := s.net, s.Host
	args := []string{"-host", n.Hosts[i].Addr, "-name", n.Hosts[i].Name, "-routes", strings.Join(s.peers, ",")}
	// The store: under JetStreamDir, kept; else a fresh one for this run of
	// the process, made here and removed here once it exits (a server
	// killed, as tests do, never ran its own removal: every test run left
	// tickbus-netns-js-* directories behind)
	scratch, started := "", false
	if s.opts.JetStreamDir != "" {
		args = append(args, "-js", filepath.Join(s.opts.JetStreamDir, n.Hosts[i].Name))
	} else {
		tmp, err := os.MkdirTemp("", "tickbus-netns-js-")
		if err != nil {
			return fmt.Errorf("netns: JetStream store for %s: %w", n.Hosts[i].Name, err)
		}
		scratch = tmp
		args = append(args, "-js", tmp)
	}
	removeScratch := func() {
		if scratch != "" {
			_ = os.RemoveAll(scratch)
		}
	}
	defer func() {
		if !started { // the process never ran: nobody else removes it
			removeScratch()
		}
	}()
	if s.opts.NoAdvertise {
		args = append(args, "-noadvertise")
	}
	base, err := child.Command(ctx, RoleNATSServer, args...)
	if err != nil {
		return err
	}
	// Not tied to ctx: the server lives until Stop, whatever ctx start had.
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Hosts[i].Name, base.Path}, base.Args[1:]...)...)
	cmd.Env = base.Env
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("netns: start nats-server in %s: %w", n.Hosts[i].Name, err)
	}
	started = true // from here the Wait below removes it
	s.cmd, s.stdin, s.done = cmd, stdin, make(chan struct{})
	done := s.done
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		s.err = cmd.Wait()
		removeScratch()
		close(done)
	}()
	s.ready = lines
	return nil
}

func (s *NATSServer) waitReady(ctx context.Context) error {
	select {
	case line, ok := <-s.ready:
		if !ok {
			<-s.done
			return fmt.Errorf("netns: nats-server in host %d exited before it was ready: %v", s.Host, s.err)
		}
		u, found := strings.CutPrefix(line, "READY ")
		if !found {
			return fmt.Errorf("netns: nats-server in host %d: %s", s.Host, line)
		}
		s.URL = u
		return nil
	case <-ctx.Done():
		return fmt.Errorf("netns: nats-server in host %d not ready: %w", s.Host, ctx.Err())
	}
}

// Stop ends the server: it closes its stdin, waits up to 10s, then kills it.
// Idempotent.
func (s *NATSServer) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return s.stopErr
	}
	s.stopped = true
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		s.stopErr = fmt.Errorf("netns: nats-server in host %d killed after 10s", s.Host)
	}
	return s.stopErr
}

// Kill ends the server at once, as a crash would. Idempotent with Stop.
func (s *NATSServer) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	return nil
}

func (s *NATSServer) kill() {
	if !s.stopped {
		s.stopped = true
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Restart kills the server (if it still runs) and starts it again in its
// host, with the same name, routes and JetStream directory, returning once
// it has a route to every peer again (peers that are down make it fail).
func (s *NATSServer) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	if err := s.start(ctx); err != nil {
		return err
	}
	s.stopped, s.stopErr = false, nil
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		return err
	}
	return nil
}

// WaitJetStream waits until the server answers JetStream requests (in a
// cluster: until a meta leader is elected), or ctx ends.
func (s *NATSServer) WaitJetStream(ctx context.Context) error {
	nc, err := nats.Connect(s.URL, nats.Timeout(5*time.Second), nats.MaxReconnects(0))
	if err != nil {
		return fmt.Errorf("netns: JetStream at %s: %w", s.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("netns: JetStream at %s: %w", s.URL, err)
	}
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("netns: JetStream at %s not ready: %w (last: %v)", s.URL, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
