package app

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/rdma"
)

// openNode opens the bus node and the device set the configuration
// describes.
func openNode(ctx context.Context, c *config.Config, log zerolog.Logger) (*bus.Node, *link.Devices, error) {
	b := c.Bus
	node, err := bus.Open(ctx, bus.Config{
		NodeID: b.NodeID, HostID: b.HostID, Prefix: b.Prefix,
		NATS: bus.NATSConfig{URLs: b.NATS, EmbeddedListen: b.Listen, User: b.User, Password: b.Password, Token: b.Token,
			NKeySeedFile: b.NKeySeedFile, CredsFile: b.CredsFile, CAFile: b.CAFile, CertFile: b.CertFile, KeyFile: b.KeyFile,
			EmbeddedCertFile: b.EmbeddedCertFile, EmbeddedKeyFile: b.EmbeddedKeyFile},
		Providers:         link.Providers(),
		Provider:          b.Override(),
		HeartbeatInterval: b.HeartbeatInterval, HeartbeatTimeout: b.HeartbeatTimeout, LeaseTTL: b.LeaseTTL,
		UnheardHold:   b.UnheardHold,
		Authorization: bus.Authorization{Publish: b.Authorization.Publish, Subscribe: b.Authorization.Subscribe},
		Logger:        &log,
	})
	if err != nil {
		return nil, nil, err
	}
	return node, link.NewDevices(link.DevicesConfig{HostID: node.HostID(), TCPListen: b.TCPListen, TCPAdvertise: b.TCPAdvertise, Logger: log}), nil
}

// provider is the device a subscriber's ring and a home are allocated on:
// the node's override, else shm. Peers reach them over the provider the bus
// picks per peer (shm on one host, tcp across hosts); the memory is then
// registered on that device too.
func provider(c *config.Config) string {
	if p := c.Bus.Override(); p != "" {
		return p
	}
	return rdma.ProviderShm
}
