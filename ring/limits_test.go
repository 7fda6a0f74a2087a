package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// issue 10: 16,777,216 slots of 32 KiB (512 GiB) passed the ring's checks
// (each within its own bound) and the host then stalled pre-touching it. A
// ring or a journal over MaxRegionBytes is refused at once, naming the
// fields and the limit, whatever path made the config (the CLI's
// configuration, the root package's options, a program's RingConfig).
func TestConfigs_RegionOverMaxRegionBytes_RefusedNamingFieldsAndLimit(t *testing.T) {
	dev := openDev(t)
	_, err := NewRing(dev, RingConfig{Slots: 1 << 24, SlotSize: 32 << 10, MaxBatch: 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Slots 16777216 x SlotSize 32768 = 549755813888 bytes, want at most 4294967296 (4 GiB")
	_, err = NewRing(dev, RingConfig{Slots: 1 << 23, SlotSize: 1 << 10, MaxBatch: 1})
	require.ErrorIs(t, err, ErrInvalidConfig, "8 GiB")
	_, err = NewHome(dev, HomeConfig{JournalSlots: 1 << 24, SlotSize: 1 << 20})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "JournalSlots 16777216 x SlotSize 1048576")
	assert.Contains(t, err.Error(), "want at most 4294967296")
	require.NoError(t, checkRegionBytes("Slots", 1<<22, 1<<10), "4 GiB exactly is the limit, not over it")
}
