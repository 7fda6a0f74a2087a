package dash

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	neturl "net/url"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickbus/tickbus"
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

// Connect joins the bus as a client of its own, through the public API
// (tickbus.Connect), with this configuration's URLs, credentials and TLS
// and the stats subjects' prefix. It reconnects forever: the dashboard
// outlives server restarts.
func (c *NATSConfig) Connect(ctx context.Context, prefix string) (*tickbus.Client, error) {
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := c.Name
	if name == "" {
		name = "tickbus-dash"
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	opts := []tickbus.Option{tickbus.WithNATS(url), tickbus.WithNodeID(fmt.Sprintf("%s-%x", name, suffix))}
	if prefix != "" {
		opts = append(opts, tickbus.WithPrefix(prefix))
	}
	switch {
	case c.Creds != "":
		opts = append(opts, tickbus.WithCredentials(c.Creds))
	case c.Token != "":
		opts = append(opts, tickbus.WithToken(c.Token))
	case c.User != "":
		opts = append(opts, tickbus.WithUserPassword(c.User, c.Password))
	}
	if c.TLSCA != "" || c.TLSCert != "" {
		opts = append(opts, tickbus.WithTLS(c.TLSCA, c.TLSCert, c.TLSKey))
	}
	cl, err := tickbus.Connect(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dash: connect to NATS at %s: %w", url, err)
	}
	return cl, nil
}

// redactURL drops the user and password from a NATS URL, for display.
func redactURL(s string) string {
	u, err := neturl.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}
