package bus_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// The embedded server's token: made once, 0600 in a 0700 runtime dir, the
// same for every caller; a token file others may read is refused; a node
// dialling the loopback server without credentials finds it, an anonymous
// client does not get in.
func TestEmbeddedToken_RuntimeDir_OneSecretFoundByLocalNodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	t.Setenv(bus.RuntimeDirEnv, dir)
	tok, err := bus.EmbeddedToken()
	require.NoError(t, err)
	again, err := bus.EmbeddedToken()
	require.NoError(t, err)
	assert.Equal(t, tok, again)
	assert.Len(t, tok, 48)
	st, err := os.Stat(filepath.Join(dir, bus.EmbeddedSecretFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	a := openNode(t, testConfig("tok-a", ""))
	assert.Contains(t, a.ClientURL(), tok+"@", "ClientURL carries the token")
	assert.NotContains(t, a.ServerURL(), tok)
	_, err = nats.Connect(a.ServerURL(), nats.MaxReconnects(0), nats.Timeout(5*time.Second))
	require.ErrorIs(t, err, nats.ErrAuthorization, "anonymous client accepted")
	b := openNode(t, testConfig("tok-b", a.ServerURL())) // no credentials: the runtime dir's token
	require.Eventually(t, func() bool { return len(b.Peers()) == 1 }, eventually, tick)

	require.NoError(t, os.Chmod(filepath.Join(dir, bus.EmbeddedSecretFile), 0o644))
	_, err = bus.EmbeddedToken()
	assert.ErrorContains(t, err, "want 0600")
	require.NoError(t, os.Chmod(dir, 0o755))
	_, err = bus.RuntimeDir()
	assert.ErrorContains(t, err, "no access for group or others")
}
