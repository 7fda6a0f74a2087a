package bus

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServeNATS runs a nats-server for a bus in this process, as a Node's
// embedded server (startEmbedded) but with no node on it: for a process
// that hosts the bus's NATS and takes no part in it (the demo, the bench).
// listen is "host:port" (port 0: any free one); clients must present
// token. The caller removes the returned JetStream store directory after
// the server's Shutdown.
func ServeNATS(listen, name, token string) (*server.Server, string, error) {
	return startEmbedded(listen, name, token, NATSConfig{})
}

// startEmbedded runs a nats-server in this process: listen address as
// given, JetStream (homes are elected in its key-value buckets) with its
// store in a fresh temporary directory the caller removes after Shutdown,
// no logging, no signal handlers. Clients must present token (see
// embeddedToken); "" would let anyone in. With c.EmbeddedCertFile the
// server speaks TLS only, and verifies client certificates by c.CAFile
// when c has a client certificate of its own.
func startEmbedded(listen, name, token string, c NATSConfig) (*server.Server, string, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, "", fmt.Errorf("%w: embedded listen %q: %v", ErrConnect, listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("%w: embedded listen port %q", ErrConnect, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	dir, err := os.MkdirTemp("", "tickbus-js-")
	if err != nil {
		return nil, "", fmt.Errorf("%w: embedded JetStream store: %v", ErrConnect, err)
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   dir,
		// Small: the buckets hold one lease and one record per topic.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  256 << 20,
		HTTPPort:           0,
		// Authorization is the token every client must present.
		Authorization: token,
	}
	if c.EmbeddedCertFile != "" {
		verify := c.CertFile != ""
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.EmbeddedCertFile, KeyFile: c.EmbeddedKeyFile,
			CaFile: c.CAFile, Verify: verify})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, "", fmt.Errorf("%w: NATS.EmbeddedCertFile %q / EmbeddedKeyFile %q / CAFile %q: %v",
				ErrInvalidConfig, c.EmbeddedCertFile, c.EmbeddedKeyFile, c.CAFile, err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, verify, 2
	}
	s, err := server.NewServer(opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("%w: embedded server: %v", ErrConnect, err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("%w: embedded server on %s not ready after 10s", ErrConnect, listen)
	}
	return s, dir, nil
}
