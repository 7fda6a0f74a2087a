package bus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// certs writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, into dir.
func certs(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tickbus test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		require.NoError(t, err)
		kder, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return
}

func openWith(t *testing.T, id, url string, mut func(*bus.NATSConfig)) (*bus.Node, error) {
	cfg := testConfig(id, url)
	mut(&cfg.NATS)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := bus.Open(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { _ = n.Close() })
	}
	return n, err
}

func TestNode_ExternalServer_MutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, sc, sk, cc, ck := certs(t, dir)
	port := freePort(t)
	startNatsd(t, port, "-cert", sc, "-key", sk, "-ca", ca)
	url := "tls://127.0.0.1:" + itoa(port)

	_, err := openWith(t, "nocert", url, func(c *bus.NATSConfig) { c.CAFile = ca })
	require.ErrorIs(t, err, bus.ErrConnect, "the server verifies client certificates")
	_, err = openWith(t, "noca", url, func(c *bus.NATSConfig) { c.CertFile, c.KeyFile = cc, ck })
	require.ErrorIs(t, err, bus.ErrConnect, "the client verifies the server")

	a, err := openWith(t, "a", url, func(c *bus.NATSConfig) { c.CAFile, c.CertFile, c.KeyFile = ca, cc, ck })
	require.NoError(t, err)
	b, err := openWith(t, "b", url, func(c *bus.NATSConfig) { c.CAFile, c.CertFile, c.KeyFile = ca, cc, ck })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 && len(b.Peers()) == 1 }, eventually, tick)
}

func TestNode_ExternalServer_NKeySeedFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	require.NoError(t, os.WriteFile(otherFile, otherSeed, 0o600))

	_, url := startNatsd(t, freePort(t), "-nkey", pub)
	_, err = openWith(t, "stranger", url, func(c *bus.NATSConfig) { c.NKeySeedFile = otherFile })
	require.ErrorIs(t, err, bus.ErrConnect)
	a, err := openWith(t, "a", url, func(c *bus.NATSConfig) { c.NKeySeedFile = seedFile })
	require.NoError(t, err)
	require.True(t, a.Connected())
}

func TestNode_ExternalServer_CredsFile(t *testing.T) {
	dir := t.TempDir()
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opPub, err := op.PublicKey()
	require.NoError(t, err)
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	require.NoError(t, err)
	acc, err := nkeys.CreateAccount()
	require.NoError(t, err)
	accPub, err := acc.PublicKey()
	require.NoError(t, err)
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(op)
	require.NoError(t, err)
	creds := func(name string, signer nkeys.KeyPair) string {
		u, err := nkeys.CreateUser()
		require.NoError(t, err)
		uPub, err := u.PublicKey()
		require.NoError(t, err)
		uJWT, err := jwt.NewUserClaims(uPub).Encode(signer)
		require.NoError(t, err)
		seed, err := u.Seed()
		require.NoError(t, err)
		b, err := jwt.FormatUserConfig(uJWT, seed)
		require.NoError(t, err)
		p := filepath.Join(dir, name+".creds")
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	opFile, accFile := filepath.Join(dir, "op.jwt"), filepath.Join(dir, "acc.jwt")
	require.NoError(t, os.WriteFile(opFile, []byte(opJWT), 0o600))
	require.NoError(t, os.WriteFile(accFile, []byte(accJWT), 0o600))

	_, url := startNatsd(t, freePort(t), "-operator", opFile, "-account", accFile)
	stranger, err := nkeys.CreateAccount() // an account the operator never signed
	require.NoError(t, err)
	_, err = openWith(t, "stranger", url, func(c *bus.NATSConfig) { c.CredsFile = creds("stranger", stranger) })
	require.ErrorIs(t, err, bus.ErrConnect)
	good := creds("user", acc)
	a, err := openWith(t, "a", url, func(c *bus.NATSConfig) { c.CredsFile = good })
	require.NoError(t, err)
	b, err := openWith(t, "b", url, func(c *bus.NATSConfig) { c.CredsFile = good })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(a.Peers()) == 1 && len(b.Peers()) == 1 }, eventually, tick)
}
