package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// natsOptions are the node's own nats.go options: its name, reconnect forever
// with capped exponential backoff and jitter, and its event handlers.
func (n *Node) natsOptions() []nats.Option {
	c := n.cfg.NATS
	opts := []nats.Option{
		nats.Name("tickbus " + n.self.ID),
		// replies to this node come to _INBOX.<node id>.…, so a server's
		// subject permissions can keep them from every other identity
		nats.CustomInboxPrefix("_INBOX." + n.self.ID),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			d := c.ReconnectWait
			for i := 1; i < attempts && d < c.ReconnectMax; i++ {
				d *= 2
			}
			d = min(d, c.ReconnectMax)
			return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		}),
		nats.DisconnectErrHandler(n.onDisconnect),
		nats.ReconnectHandler(n.onReconnect),
		nats.ErrorHandler(n.onAsyncError),
	}
	return opts
}

// AuthOptions turns the credentials and TLS settings into nats.go options,
// for the node and for any other NATS client of tickbus (the dashboard).
func (c NATSConfig) AuthOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: NATS.NKeySeedFile %q: %v", ErrInvalidConfig, c.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.User == "" && c.Token == "" && c.NKeySeedFile == "" && c.CredsFile == "" && loopbackOnly(c.URLs) {
		// a tickbus embedded server on this host: its token is in the
		// runtime dir (a server without authentication ignores it)
		if dir, err := RuntimeDir(); err == nil {
			if tok, err := readSecret(filepath.Join(dir, EmbeddedSecretFile)); err == nil {
				opts = append(opts, nats.Token(string(tok)))
			}
		}
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return opts, nil
}

// loopbackOnly reports whether every URL names a loopback host and none
// carries credentials of its own.
func loopbackOnly(urls []string) bool {
	if len(urls) == 0 {
		return false
	}
	for _, s := range urls {
		for _, one := range strings.Split(s, ",") {
			one = strings.TrimSpace(one)
			if !strings.Contains(one, "://") {
				one = "nats://" + one
			}
			u, err := url.Parse(one)
			if err != nil || u.User != nil {
				return false
			}
			h := u.Hostname()
			if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return false
			}
		}
	}
	return true
}

// dialWait dials until it connects, ctx ends, or WaitForServer is off.
// Authentication and TLS failures are not retried.
func (n *Node) dialWait(ctx context.Context) (*nats.Conn, error) {
	wait := n.cfg.NATS.ReconnectWait
	for {
		nc, err := n.dial()
		if err == nil || !n.cfg.NATS.WaitForServer || n.srv != nil || !retryable(err) {
			return nc, err
		}
		n.log.Warn().Err(err).Dur("retry_in", wait).Msg("bus: NATS not reachable yet")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until %v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, n.cfg.NATS.ReconnectMax)
	}
}

func retryable(err error) bool {
	return errors.Is(err, nats.ErrNoServers) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, nats.ErrTimeout)
}

// dial connects to the configured URLs or to the embedded server.
func (n *Node) dial() (*nats.Conn, error) {
	c := n.cfg.NATS
	auth, err := c.AuthOptions()
	if err != nil {
		return nil, err
	}
	opts := append(n.natsOptions(), auth...)
	url := strings.Join(c.URLs, ",")
	if n.srv != nil {
		url = n.srv.ClientURL()
		opts = append(opts, nats.Token(n.token))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConnect, url, err)
	}
	return nc, nil
}

func (n *Node) onDisconnect(_ *nats.Conn, err error) {
	n.connected.Store(false)
	if n.ctx.Err() != nil {
		return // our own Close
	}
	n.log.Warn().Err(err).Msg("bus: NATS disconnected; data plane continues, peer ageing paused")
}

func (n *Node) onReconnect(nc *nats.Conn) {
	n.reconnects.Add(1)
	n.log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("bus: NATS reconnected; re-announcing")
	n.mu.Lock()
	now := time.Now()
	for _, p := range n.peers { // they could not reach us either: give them a fresh timeout
		p.lastSeen = now
	}
	for _, m := range n.localSubs {
		for _, s := range m {
			s.reconnected()
		}
	}
	n.mu.Unlock()
	n.connected.Store(true)
	for _, b := range n.watches { // their consumers may be gone with the server
		b.askRestart("reconnected")
	}
	select {
	case n.reread <- struct{}{}: // home records may have changed unseen
	default:
	}
	n.announceAll("", "")
	n.sendWho("", "")
}

func (n *Node) onAsyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	subj := ""
	if sub != nil {
		subj = sub.Subject
	}
	if ok, held := n.limiter.allow("async/"+subj, time.Now()); ok {
		n.log.Error().Err(err).Str("subject", subj).Int("suppressed", held).Msg("bus: NATS async error")
	}
}
