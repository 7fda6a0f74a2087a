package membarrier_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/membarrier"
)

func TestFence_WorksWhereAvailable(t *testing.T) {
	if runtime.GOOS != "linux" {
		assert.False(t, membarrier.Available())
		assert.False(t, membarrier.Fence())
		return
	}
	if !membarrier.Available() {
		t.Skip("membarrier(2) private expedited is refused here (old kernel or seccomp); solo claims stay off")
	}
	require.True(t, membarrier.Fence())
	assert.True(t, membarrier.Fence(), "a second fence works too")
}
