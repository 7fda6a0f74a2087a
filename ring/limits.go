package ring

import "fmt"

// MaxRegionBytes bounds a ring's slots and a home's journal (slots x slot
// size): a region is registered and pre-touched at once, so a larger one
// (16,777,216 slots of 32 KiB, 512 GiB: issue 10) would stall the host in
// the kernel instead of failing. The CLI's configuration has the same
// bound (internal/config.MaxRingBytes) and half of the host's memory.
const MaxRegionBytes = 4 << 30

// checkRegionBytes refuses slots x slotSize over MaxRegionBytes, naming
// the fields (as slotsKey and SlotSize) and the limit.
func checkRegionBytes(slotsKey string, slots, slotSize int) error {
	if slots <= 0 || slotSize <= 0 {
		return nil // the geometry checks name what is wrong
	}
	if size := uint64(slots) * uint64(slotSize); size > MaxRegionBytes {
		return fmt.Errorf("%w: %s %d x SlotSize %d = %d bytes, want at most %d (4 GiB, ring.MaxRegionBytes): the region is pre-touched at start",
			ErrInvalidConfig, slotsKey, slots, slotSize, size, MaxRegionBytes)
	}
	return nil
}
