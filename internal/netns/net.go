package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ErrUnavailable: this machine cannot make network namespaces here (not
// root, no ip command, or the kernel refused).
var ErrUnavailable = errors.New("netns: network namespaces unavailable")

// ErrCommand: an ip command failed.
var ErrCommand = errors.New("netns: ip command failed")

// Config shapes a Net.
type Config struct {
	// Hosts is the number of namespaces, 1..16.
	Hosts int
	// Logger gets every ip command run; default zerolog.Nop().
	Logger zerolog.Logger

	failAt int    // tests: the failAt-th ip command of New fails
	id     string // tests: the network's id (6 hex digits), so a test can find its own objects
}

// Host is one namespace.
type Host struct {
	Name string // namespace name, for `ip netns exec`
	Addr string // its IPv4 address on the bridge, without port
}

// Net is a set of namespaces on one bridge.
type Net struct {
	Hosts []Host
	// Gateway is the bridge's address in the root namespace: how processes
	// of the root namespace are reached from the hosts.
	Gateway string

	id     string
	bridge string
	veths  []string // root-side ends
	log    zerolog.Logger
	failAt int
	steps  int

	mu     sync.Mutex
	closed bool
	err    error
}

var (
	availOnce sync.Once
	availErr  error
)

// Available reports nil if New can work here, or an error wrapping
// ErrUnavailable that says why (for t.Skip).
func Available() error {
	availOnce.Do(func() {
		if os.Geteuid() != 0 {
			availErr = fmt.Errorf("%w: not root (need CAP_NET_ADMIN and CAP_SYS_ADMIN)", ErrUnavailable)
			return
		}
		if _, err := exec.LookPath("ip"); err != nil {
			availErr = fmt.Errorf("%w: no ip command (install iproute2): %v", ErrUnavailable, err)
			return
		}
		name := "tbprobe" + randHex(4)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := run(ctx, zerolog.Nop(), "netns", "add", name); err != nil {
			availErr = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return
		}
		if err := run(ctx, zerolog.Nop(), "netns", "del", name); err != nil {
			availErr = fmt.Errorf("%w: cannot remove probe namespace: %v", ErrUnavailable, err)
		}
	})
	return availErr
}

// New creates cfg.Hosts namespaces, each with a veth pair whose root end is
// on a new bridge, addresses from a random 10.x.y.0/24, and loopback up.
// On error everything made so far is removed.
func New(ctx context.Context, cfg Config) (*Net, error) {
	if cfg.Hosts < 1 || cfg.Hosts > 16 {
		return nil, fmt.Errorf("netns: Hosts %d, want 1..16", cfg.Hosts)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	id := randHex(3) // 6 hex digits: interface names stay under 15 bytes
	if cfg.id != "" {
		id = cfg.id
	}
	var sub [2]byte
	if _, err := rand.Read(sub[:]); err != nil {
		return nil, fmt.Errorf("netns: random subnet: %w", err)
	}
	prefix := fmt.Sprintf("10.%d.%d.", 100+sub[0]%100, sub[1])
	n := &Net{id: id, bridge: "tb" + id + "br", Gateway: prefix + "254", log: cfg.Logger, failAt: cfg.failAt}
	fail := func(err error) (*Net, error) {
		return nil, errors.Join(err, n.Close())
	}
	if err := n.ip(ctx, "link", "add", n.bridge, "type", "bridge"); err != nil {
		return fail(err)
	}
	n.veths = append(n.veths, n.bridge) // removed like a veth end
	steps := [][]string{
		{"addr", "add", n.Gateway + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < cfg.Hosts; i++ {
		h := Host{Name: fmt.Sprintf("tb%sh%d", id, i), Addr: fmt.Sprintf("%s%d", prefix, i+1)}
		if err := n.ip(ctx, "netns", "add", h.Name); err != nil {
			return fail(err)
		}
		n.Hosts = append(n.Hosts, h)
		root, peer := fmt.Sprintf("tb%sv%d", id, i), fmt.Sprintf("tb%sp%d", id, i)
		if err := n.ip(ctx, "link", "add", root, "type", "veth", "peer", "name", peer); err != nil {
			return fail(err)
		}
		n.veths = append(n.veths, root)
		for _, s := range [][]string{
			{"link", "set", peer, "netns", h.Name},
			{"link", "set", root, "master", n.bridge},
			{"link", "set", root, "up"},
			{"-n", h.Name, "link", "set", peer, "name", "eth0"},
			{"-n", h.Name, "addr", "add", h.Addr + "/24", "dev", "eth0"},
			{"-n", h.Name, "link", "set", "eth0", "up"},
			{"-n", h.Name, "link", "set", "lo", "up"},
			{"-n", h.Name, "route", "add", "default", "via", n.Gateway},
		} {
			if err := n.ip(ctx, s...); err != nil {
				return fail(err)
			}
		}
	}
	return n, nil
}

// Command returns a command that runs name with args inside host i.
func (n *Net) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Hosts[i].Name, name}, args...)...)
}

// Close removes every namespace, veth and the bridge. Processes still
// running in a namespace keep it alive until they exit, so stop them
// first. Idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return n.err
	}
	n.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	// Deleting a namespace deletes the veth end inside it, and with it the
	// root end; delete root ends explicitly too in case a namespace step
	// failed before the move.
	for _, h := range n.Hosts {
		if err := n.ip(ctx, "netns", "del", h.Name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range n.veths {
		if !linkExists(ctx, v) {
			continue
		}
		// The kernel removes a veth's root end asynchronously after its
		// namespace goes; one that vanished meanwhile is not an error.
		if err := n.ip(ctx, "link", "del", v); err != nil && linkExists(ctx, v) {
			errs = append(errs, err)
		}
	}
	n.err = errors.Join(errs...)
	return n.err
}

func linkExists(ctx context.Context, name string) bool {
	return exec.CommandContext(ctx, "ip", "link", "show", "dev", name).Run() == nil
}

func (n *Net) ip(ctx context.Context, args ...string) error {
	n.steps++
	if n.failAt > 0 && n.steps == n.failAt {
		return fmt.Errorf("%w: injected failure at step %d (ip %s)", ErrCommand, n.steps, strings.Join(args, " "))
	}
	return run(ctx, n.log, args...)
}

func run(ctx context.Context, log zerolog.Logger, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	log.Debug().Strs("ip", args).Err(err).Msg("netns")
	if err != nil {
		return fmt.Errorf("%w: ip %s: %v: %s", ErrCommand, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("netns: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// SetLink takes host i's link to the bridge down (up false) or brings it
// back up, from inside the host: a network partition of that host while its
// processes and sockets stay alive. Bringing it up restores the default
// route, which the kernel drops with the link.
func (n *Net) SetLink(ctx context.Context, i int, up bool) error {
	if i < 0 || i >= len(n.Hosts) {
		return fmt.Errorf("netns: no host %d", i)
	}
	h := n.Hosts[i].Name
	if !up {
		return n.ip(ctx, "-n", h, "link", "set", "eth0", "down")
	}
	if err := n.ip(ctx, "-n", h, "link", "set", "eth0", "up"); err != nil {
		return err
	}
	return n.ip(ctx, "-n", h, "route", "replace", "default", "via", n.Gateway)
}
