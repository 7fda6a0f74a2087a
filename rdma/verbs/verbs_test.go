//go:build verbs && cgo && linux

package verbs_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/verbs"
)

// openOrSkip opens the first RDMA device, or skips: this machine class has
// no RDMA NIC and no InfiniBand support in its kernel.
func openOrSkip(t testing.TB) rdma.Device {
	t.Helper()
	d, err := verbs.Open(verbs.Config{HostID: "verbs-test"})
	if errors.Is(err, rdma.ErrNoDevice) {
		t.Skipf("skipping: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpen_RefusesBadConfigBeforeTouchingTheDevice(t *testing.T) {
	_, err := verbs.Open(verbs.Config{Port: 300})
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
	_, err = verbs.Open(verbs.Config{GIDIndex: -1})
	require.ErrorIs(t, err, rdma.ErrInvalidConfig)
}

func TestDevice_ReportsAtomicCaps(t *testing.T) {
	d := openOrSkip(t)
	require.Equal(t, rdma.ProviderVerbs, d.Provider())
	t.Logf("atomic cap %d, max inline %d", d.Caps().Atomic, d.Caps().MaxInline)
}
