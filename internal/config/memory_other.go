//go:build !linux

package config

// physicalMemory is unknown here: only MaxRingBytes bounds a ring.
func physicalMemory() uint64 { return 0 }
