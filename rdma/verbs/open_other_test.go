//go:build !(verbs && cgo && linux)

package verbs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/verbs"
)

func TestOpen_WithoutTagSaysHowToBuild(t *testing.T) {
	_, err := verbs.Open(verbs.Config{})
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	require.ErrorContains(t, err, "-tags verbs")
}
