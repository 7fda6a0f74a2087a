package link

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func TestDevices_Get_OpensEachProviderOnceAndCloseReleasesThem(t *testing.T) {
	s := NewDevices(DevicesConfig{HostID: "h"})
	shm1, err := s.Get(rdma.ProviderShm)
	require.NoError(t, err)
	shm2, err := s.Get(rdma.ProviderShm)
	require.NoError(t, err)
	assert.Same(t, shm1, shm2, "one device per provider")
	assert.Equal(t, "h", shm1.HostID())
	tcp, err := s.Get(rdma.ProviderTCP)
	require.NoError(t, err)
	assert.Equal(t, rdma.ProviderTCP, tcp.Provider())

	_, err = s.Get(rdma.ProviderVerbs)
	assert.ErrorIs(t, err, ErrUnsupported)
	_, err = s.Get("carrier-pigeon")
	assert.ErrorIs(t, err, ErrUnsupported)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	_, err = s.Get(rdma.ProviderShm)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = shm1.RegisterMemory(4096, rdma.AccessLocalWrite)
	assert.Error(t, err, "the device was closed")
}
