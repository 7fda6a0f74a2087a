package config

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoad_TCPListenAndAdvertise_FromFileAndFlags(t *testing.T) {
	p := writeFile(t, "bus:\n  tcp_listen: 0.0.0.0:7471\n  tcp_advertise: 10.0.0.5:7471\n")
	c, err := Load("sub", "x", []string{"--config", p}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:7471", c.Bus.TCPListen)
	assert.Equal(t, "10.0.0.5:7471", c.Bus.TCPAdvertise)

	c, err = Load("pub", "x", []string{"--config", p, "--tcp-listen", "10.0.0.6:0"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.6:0", c.Bus.TCPListen, "flags win over the file")
}

func TestBusTCPListen_BadValue_NamesKeyAndValue(t *testing.T) {
	for key, set := range map[string]func(*Config){
		"bus.tcp_listen":    func(c *Config) { c.Bus.TCPListen = "10.0.0.5" },
		"bus.tcp_advertise": func(c *Config) { c.Bus.TCPAdvertise = "host:" },
	} {
		c := Default()
		set(&c)
		err := c.Validate("sub")
		require.ErrorIs(t, err, ErrBadValue, key)
		assert.Contains(t, err.Error(), key)
		assert.Contains(t, err.Error(), "host:port")
	}
}
