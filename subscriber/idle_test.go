package subscriber

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// A subscriber configured with no idle strategy polls through the adaptive
// one: microseconds while ticks flow, parked when idle (ring's
// TestReader_Run_AdaptiveIdleParksWhenIdle shows the park).
func TestConfig_DefaultIdleIsAdaptive(t *testing.T) {
	c := Config{Topic: "t"}
	require.NoError(t, c.setDefaults())
	assert.IsType(t, &rdma.Adaptive{}, c.Idle)
}
