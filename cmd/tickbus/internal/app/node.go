package app

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/internal/devices"
	"github.com/tickbus/tickbus/rdma"
)

// openNode opens the bus node and the device set the configuration
// describes.
func openNode(ctx context.Context, c *config.Config, log zerolog.Logger) (*bus.Node, *devices.Set, error) {
	b := c.Bus
	node, err := bus.Open(ctx, bus.Config{
		NodeID: b.NodeID, HostID: b.HostID, Prefix: b.Prefix,
		NATS: bus.NATSConfig{URLs: b.NATS, EmbeddedListen: b.Listen, User: b.User, Password: b.Password, Token: b.Token,
			NKeySeedFile: b.NKeySeedFile, CredsFile: b.CredsFile, CAFile: b.CAFile, CertFile: b.CertFile, KeyFile: b.KeyFile},
		Providers:         devices.Providers(),
		Provider:          b.Provider,
		HeartbeatInterval: b.HeartbeatInterval, HeartbeatTimeout: b.HeartbeatTimeout,
		Logger: &log,
	})
	if err != nil {
		return nil, nil, err
	}
	return node, devices.New(devices.Config{HostID: node.HostID(), Logger: log}), nil
}

// provider is the data-plane provider every part of one run uses.
func provider(c *config.Config) string {
	if c.Bus.Provider != "" {
		return c.Bus.Provider
	}
	return rdma.ProviderShm
}
