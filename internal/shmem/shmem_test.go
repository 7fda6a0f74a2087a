package shmem_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/shmem"
)

func TestAlloc_SharedBetweenTwoMappingsAndLookup(t *testing.T) {
	m, err := shmem.Alloc("test", 100)
	require.NoError(t, err)
	require.Equal(t, os.Getpagesize(), len(m.Bytes()))

	other, err := shmem.Map(m.Fd(), len(m.Bytes()))
	require.NoError(t, err)
	m.Bytes()[10] = 42
	assert.Equal(t, byte(42), other[10], "a second mapping of the memfd sees the write")
	require.NoError(t, shmem.Unmap(other))

	got, off, err := shmem.Lookup(m.Bytes()[64:128])
	require.NoError(t, err)
	assert.Same(t, m, got)
	assert.Equal(t, 64, off)

	_, _, err = shmem.Lookup(make([]byte, 8))
	require.ErrorIs(t, err, shmem.ErrNotShared)

	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
}

func TestAlloc_RejectsZero(t *testing.T) {
	_, err := shmem.Alloc("zero", 0)
	require.Error(t, err)
}
