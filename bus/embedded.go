package bus

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded runs a nats-server in this process: listen address as
// given, no JetStream, nothing on disk, no logging, no signal handlers.
// Clients must present token (see embeddedToken); "" would let anyone in.
func startEmbedded(listen, name, token string) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded listen %q: %v", ErrConnect, listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: embedded listen port %q", ErrConnect, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  false,
		HTTPPort:   0,
		// Authorization is the token every client must present.
		Authorization: token,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded server: %v", ErrConnect, err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("%w: embedded server on %s not ready after 10s", ErrConnect, listen)
	}
	return s, nil
}
