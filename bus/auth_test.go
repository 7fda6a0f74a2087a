package bus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestNode_ExternalServer_TokenAndUserPassword(t *testing.T) {
	open := func(id, url string, mut func(*bus.NATSConfig)) (*bus.Node, error) { return openWith(t, id, url, mut) }

	_, tokURL := startNatsd(t, freePort(t), "-token", "s3cret")
	_, err := open("bad", tokURL, func(c *bus.NATSConfig) { c.Token = "wrong" })
	require.ErrorIs(t, err, bus.ErrConnect)
	a, err := open("a", tokURL, func(c *bus.NATSConfig) { c.Token = "s3cret" })
	require.NoError(t, err)
	b, err := open("b", tokURL, func(c *bus.NATSConfig) { c.Token = "s3cret" })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 && len(b.Peers()) == 1 }, eventually, tick)

	_, upURL := startNatsd(t, freePort(t), "-user", "feed", "-pass", "pw")
	_, err = open("bad2", upURL, func(c *bus.NATSConfig) { c.User, c.Password = "feed", "nope" })
	require.ErrorIs(t, err, bus.ErrConnect)
	c, err := open("c", upURL, func(c *bus.NATSConfig) { c.User, c.Password = "feed", "pw" })
	require.NoError(t, err)
	assert.True(t, c.Connected())
}
