package shmem_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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

func TestAllocUnits_EachUnitItsOwnMemfd_OneContiguousMemory(t *testing.T) {
	ps := os.Getpagesize()
	m, err := shmem.AllocUnits("units", 3*ps+100, ps, 2)
	require.NoError(t, err)
	defer m.Close()
	b := m.Bytes()
	require.Len(t, b, 4*ps)
	p := m.Pieces()
	require.Len(t, p, 3, "two units and the rest")
	assert.Equal(t, []int{0, ps, 2 * ps}, []int{p[0].Off, p[1].Off, p[2].Off})
	assert.Equal(t, []int{ps, ps, 2 * ps}, []int{p[0].Len, p[1].Len, p[2].Len})
	for i, pc := range p {
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(pc.Fd, &st))
		assert.Equal(t, int64(pc.Len), st.Size, "piece %d's memfd is exactly its part", i)
		other, err := shmem.Map(pc.Fd, pc.Len)
		require.NoError(t, err)
		b[pc.Off+7] = byte(40 + i)
		assert.Equal(t, byte(40+i), other[7], "piece %d's memfd backs its part of the memory", i)
		require.NoError(t, shmem.Unmap(other))
	}
	got, off, err := shmem.Lookup(b[ps+8 : 3*ps])
	require.NoError(t, err)
	assert.Same(t, m, got)
	assert.Equal(t, ps+8, off)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
}

func TestAllocUnits_RejectsBadUnits(t *testing.T) {
	ps := os.Getpagesize()
	for _, c := range [][3]int{{0, ps, 1}, {ps, 0, 1}, {ps, ps + 1, 1}, {ps, ps, 0}, {(shmem.MaxUnits + 1) * ps, ps, shmem.MaxUnits + 1}} {
		_, err := shmem.AllocUnits("bad", c[0], c[1], c[2])
		assert.Error(t, err, "size %d unit %d n %d", c[0], c[1], c[2])
	}
}
