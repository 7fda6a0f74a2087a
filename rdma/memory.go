package rdma

import (
	"fmt"
	"os"

	"github.com/tickbus/tickbus/internal/shmem"
)

// MemoryConfig says how AllocMemory backs memory.
type MemoryConfig struct {
	// GrantUnit (bytes, a multiple of the page size; 0: none) and
	// GrantUnits ask for memory backed in grant units: each of the first
	// GrantUnits units of GrantUnit bytes is memory of its own, and the
	// rest of the size (rounded up to whole pages), if any, is one more
	// unit. A provider whose peers map what they are granted (shm) hands a
	// peer of QueuePair.GrantRange only the units the range covers, so a
	// peer cannot map the rest of the region even if it tries; ops outside
	// the range are refused on every provider. tcp and verbs need no units
	// (their responder and memory windows are exact) and register the
	// memory as one. At most 4096 units in all.
	GrantUnit  int
	GrantUnits int
}

// maxGrantUnits is the most units one Memory may have.
const maxGrantUnits = shmem.MaxUnits

// Memory is shareable memory of this process, allocated apart from any
// device so that each device registers the same memory (Device.Register)
// and a provider's grants follow its units (MemoryConfig). It is zeroed,
// page-aligned and pre-touched. Close it after every region registered
// on it.
type Memory struct{ m *shmem.Mapping }

// AllocMemory allocates size bytes (rounded up to whole pages) as cfg
// says.
func AllocMemory(name string, size int, cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(size); err != nil {
		return nil, err
	}
	var m *shmem.Mapping
	var err error
	if cfg.GrantUnit == 0 {
		m, err = shmem.Alloc(name, size)
	} else {
		m, err = shmem.AllocUnits(name, size, cfg.GrantUnit, cfg.GrantUnits)
	}
	if err != nil {
		return nil, fmt.Errorf("rdma: allocate %d bytes: %w", size, err)
	}
	return &Memory{m: m}, nil
}

// Validate checks cfg for memory of size bytes.
func (cfg MemoryConfig) Validate(size int) error {
	ps := os.Getpagesize()
	switch {
	case size <= 0:
		return fmt.Errorf("%w: memory size %d, want > 0", ErrInvalidConfig, size)
	case cfg.GrantUnit < 0 || cfg.GrantUnit%ps != 0:
		return fmt.Errorf("%w: GrantUnit %d, want 0 or a multiple of the page size %d", ErrInvalidConfig, cfg.GrantUnit, ps)
	case cfg.GrantUnits < 0 || (cfg.GrantUnit == 0) != (cfg.GrantUnits == 0):
		return fmt.Errorf("%w: GrantUnits %d with GrantUnit %d, want both 0 or both positive", ErrInvalidConfig, cfg.GrantUnits, cfg.GrantUnit)
	case cfg.GrantUnit > 0 && units(size, ps, cfg) > maxGrantUnits:
		return fmt.Errorf("%w: %d bytes in GrantUnits %d of GrantUnit %d: %d units, want at most %d",
			ErrInvalidConfig, size, cfg.GrantUnits, cfg.GrantUnit, units(size, ps, cfg), maxGrantUnits)
	}
	return nil
}

// UnitRegisterer is implemented by devices that allocate memory in grant
// units themselves (shm); see RegisterMemory.
type UnitRegisterer interface {
	// RegisterMemoryUnits is Device.RegisterMemory of memory backed as cfg
	// says (cfg valid for size).
	RegisterMemoryUnits(size int, access Access, cfg MemoryConfig) (MemoryRegion, error)
}

// RegisterMemory is dev.RegisterMemory(size, access) of memory backed in
// grant units as cfg says, on a device that backs memory for its peers to
// map (UnitRegisterer: shm); other devices (tcp, verbs: their grants are
// exact without units) register it as one. The region owns its memory, as
// any RegisterMemory region does. Registering the same memory on another
// device (Device.Register) shares its units.
func RegisterMemory(dev Device, size int, access Access, cfg MemoryConfig) (MemoryRegion, error) {
	if err := cfg.Validate(size); err != nil {
		return nil, err
	}
	if u, ok := dev.(UnitRegisterer); ok && cfg.GrantUnit > 0 {
		return u.RegisterMemoryUnits(size, access, cfg)
	}
	return dev.RegisterMemory(size, access)
}

// units is how many units AllocMemory makes of size bytes.
func units(size, page int, cfg MemoryConfig) int {
	size = (size + page - 1) / page * page
	whole := min(cfg.GrantUnits, (size+cfg.GrantUnit-1)/cfg.GrantUnit)
	if whole*cfg.GrantUnit >= size {
		return whole
	}
	return whole + 1
}

// Bytes is the memory.
func (m *Memory) Bytes() []byte { return m.m.Bytes() }

// Close unmaps the memory. Idempotent.
func (m *Memory) Close() error { return m.m.Close() }
