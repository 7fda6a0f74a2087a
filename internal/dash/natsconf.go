package dash

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickbus/tickbus/bus"
)

// NATSConfig says how the dashboard and the stat view reach NATS.
type NATSConfig struct {
	// URL of the server or cluster, comma-separated (default
	// nats://127.0.0.1:4222).
	URL string
	// Credentials: user and password, or a token, or a .creds file.
	User, Password, Token, Creds string
	// TLS: a CA file to trust, and a client certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Name of the connection as servers list it.
	Name string
	// ConnectTimeout bounds the first connection (default 5 s).
	ConnectTimeout time.Duration
}

// RegisterFlags adds --nats and the credential and TLS flags.
func (c *NATSConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "nats", c.URL, "NATS server `URLs`, comma-separated (default "+nats.DefaultURL+")")
	fs.StringVar(&c.User, "nats-user", c.User, "NATS `user`")
	fs.StringVar(&c.Password, "nats-password", c.Password, "NATS `password`")
	fs.StringVar(&c.Token, "nats-token", c.Token, "NATS `token`")
	fs.StringVar(&c.Creds, "nats-creds", c.Creds, "NATS credentials `file`")
	fs.StringVar(&c.TLSCA, "nats-tls-ca", c.TLSCA, "CA certificate `file` to trust for NATS TLS")
	fs.StringVar(&c.TLSCert, "nats-tls-cert", c.TLSCert, "client certificate `file` for NATS TLS")
	fs.StringVar(&c.TLSKey, "nats-tls-key", c.TLSKey, "client key `file` for NATS TLS")
}

func (c *NATSConfig) validate() error {
	if c.Token != "" && (c.User != "" || c.Creds != "") {
		return fmt.Errorf("%w: nats-token %q cannot be combined with nats-user or nats-creds", ErrConfig, "***")
	}
	if c.Password != "" && c.User == "" {
		return fmt.Errorf("%w: nats-password needs nats-user", ErrConfig)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: nats-tls-cert %q and nats-tls-key %q go together", ErrConfig, c.TLSCert, c.TLSKey)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("%w: nats connect timeout %v, want >= 0", ErrConfig, c.ConnectTimeout)
	}
	return nil
}

// Connect dials NATS. The connection reconnects forever: the dashboard
// outlives server restarts.
func (c *NATSConfig) Connect(ctx context.Context, opts ...nats.Option) (*nats.Conn, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	url := c.URL
	if url == "" {
		url = nats.DefaultURL
	}
	timeout := c.ConnectTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	name := c.Name
	if name == "" {
		name = "tickbus-dash"
	}
	o := []nats.Option{nats.Name(name), nats.Timeout(timeout), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	auth, err := bus.NATSConfig{URLs: []string{url}, User: c.User, Password: c.Password, Token: c.Token, CredsFile: c.Creds,
		CAFile: c.TLSCA, CertFile: c.TLSCert, KeyFile: c.TLSKey}.AuthOptions()
	if err != nil {
		return nil, err
	}
	o = append(append(o, auth...), opts...)
	urls := strings.Join(strings.Fields(strings.ReplaceAll(url, ",", " ")), ",")
	nc, err := nats.Connect(urls, o...)
	if err != nil {
		return nil, fmt.Errorf("dash: connect to NATS at %s: %w", urls, err)
	}
	return nc, nil
}

// flush waits for the server to have seen our subscriptions, within ctx's
// deadline or 5 s.
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}
