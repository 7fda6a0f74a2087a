package config

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBusProvider_AutoAndEmptyPickPerPeer_OthersForceOne(t *testing.T) {
	for _, tc := range []struct{ value, override string }{{"", ""}, {"auto", ""}, {"shm", "shm"}, {"tcp", "tcp"}, {"verbs", "verbs"}} {
		c := Default()
		c.Bus.Provider = tc.value
		require.NoError(t, c.Validate("sub"), tc.value)
		assert.Equal(t, tc.override, c.Bus.Override(), tc.value)
	}
}

func TestBusProvider_BadValue_NamesKeyAndValue(t *testing.T) {
	c := Default()
	c.Bus.Provider = "Auto"
	err := c.Validate("pub")
	require.ErrorIs(t, err, ErrBadValue)
	assert.Contains(t, err.Error(), `bus.provider = "Auto"`)
	assert.Contains(t, err.Error(), "auto")
}

func TestLoad_HostIDAndProviderFlags(t *testing.T) {
	c, err := Load("sub", "x", []string{"--host-id", "rack7", "--provider", "tcp"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "rack7", c.Bus.HostID)
	assert.Equal(t, "tcp", c.Bus.Override())

	p := writeFile(t, "bus:\n  host_id: rack9\n  provider: auto\n")
	c, err = Load("pub", "x", []string{"--config", p}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "rack9", c.Bus.HostID)
	assert.Equal(t, "", c.Bus.Override())

	_, err = Load("pub", "x", []string{"--provider", "udp"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `bus.provider = "udp"`)
}
