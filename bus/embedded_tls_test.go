package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// The embedded server runs with TLS (NATS.EmbeddedCertFile, KeyFile): its
// node verifies it by NATS.CAFile; a plaintext client, or one that does not
// trust the CA, is refused; with client certificates configured it
// requires one (mutual TLS). Bad TLS configuration names the keys.
func TestNode_EmbeddedServer_TLS(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := certs(t, dir)
	tok, err := bus.EmbeddedToken()
	require.NoError(t, err)

	a, err := openWith(t, "tls-a", "", func(c *bus.NATSConfig) { c.EmbeddedCertFile, c.EmbeddedKeyFile, c.CAFile = sc, sk, ca })
	require.NoError(t, err)
	url := a.ServerURL()
	require.NotEmpty(t, url)
	_, err = nats.Connect(url, nats.Token(tok), nats.Timeout(2*time.Second))
	assert.Error(t, err, "a client that does not trust the CA")
	nc, err := nats.Connect(url, nats.Token(tok), nats.RootCAs(ca), nats.Timeout(2*time.Second))
	require.NoError(t, err, "a client that trusts the CA")
	assert.True(t, nc.TLSRequired())
	nc.Close()
	b, err := openWith(t, "tls-b", url, func(c *bus.NATSConfig) { c.CAFile = ca })
	require.NoError(t, err, "another node over TLS")
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 && len(b.Peers()) == 1 }, eventually, tick)

	m, err := openWith(t, "mtls", "", func(c *bus.NATSConfig) {
		c.EmbeddedCertFile, c.EmbeddedKeyFile, c.CAFile, c.CertFile, c.KeyFile = sc, sk, ca, cc, ck
	})
	require.NoError(t, err, "mutual TLS: the node presents its client certificate")
	_, err = nats.Connect(m.ServerURL(), nats.Token(tok), nats.RootCAs(ca), nats.Timeout(2*time.Second))
	assert.Error(t, err, "a client without a certificate, under mutual TLS")
	nc, err = nats.Connect(m.ServerURL(), nats.Token(tok), nats.RootCAs(ca), nats.ClientCert(cc, ck), nats.Timeout(2*time.Second))
	require.NoError(t, err, "a client with a certificate the CA signed")
	nc.Close()

	for name, mut := range map[string]func(*bus.NATSConfig){
		"EmbeddedKeyFile": func(c *bus.NATSConfig) { c.EmbeddedCertFile, c.CAFile = sc, ca },
		"NATS.CAFile":     func(c *bus.NATSConfig) { c.EmbeddedCertFile, c.EmbeddedKeyFile = sc, sk },
		"NATS.URLs": func(c *bus.NATSConfig) {
			c.EmbeddedCertFile, c.EmbeddedKeyFile, c.CAFile, c.URLs = sc, sk, ca, []string{url}
		},
		"EmbeddedCertFile": func(c *bus.NATSConfig) { c.EmbeddedCertFile, c.EmbeddedKeyFile, c.CAFile = sk, sk, ca },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cfg := bus.Config{NodeID: "bad-" + name}
		mut(&cfg.NATS)
		_, err := bus.Open(ctx, cfg)
		cancel()
		require.ErrorIs(t, err, bus.ErrInvalidConfig, name)
		assert.Contains(t, err.Error(), name)
	}
}
