package rdma_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func TestAllocMemory_BadConfig_Refused(t *testing.T) {
	ps := os.Getpagesize()
	for name, c := range map[string]struct {
		size int
		cfg  rdma.MemoryConfig
	}{
		"no size":          {0, rdma.MemoryConfig{}},
		"negative unit":    {ps, rdma.MemoryConfig{GrantUnit: -ps, GrantUnits: 1}},
		"unit not a page":  {ps, rdma.MemoryConfig{GrantUnit: ps + 8, GrantUnits: 1}},
		"units, no unit":   {ps, rdma.MemoryConfig{GrantUnits: 2}},
		"unit, no units":   {ps, rdma.MemoryConfig{GrantUnit: ps}},
		"negative units":   {ps, rdma.MemoryConfig{GrantUnit: ps, GrantUnits: -1}},
		"too many units":   {4097 * ps, rdma.MemoryConfig{GrantUnit: ps, GrantUnits: 4097}},
		"too many, rest 1": {4097 * ps, rdma.MemoryConfig{GrantUnit: ps, GrantUnits: 4096}},
	} {
		_, err := rdma.AllocMemory("bad", c.size, c.cfg)
		assert.ErrorIs(t, err, rdma.ErrInvalidConfig, name)
	}
}

func TestAllocMemory_Units(t *testing.T) {
	ps := os.Getpagesize()
	m, err := rdma.AllocMemory("units", 4096*ps, rdma.MemoryConfig{GrantUnit: ps, GrantUnits: 4095})
	require.NoError(t, err, "4095 units and the rest: 4096, the most")
	b := m.Bytes()
	require.Len(t, b, 4096*ps)
	b[len(b)-1] = 1
	assert.Zero(t, b[0], "zeroed")
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
}
