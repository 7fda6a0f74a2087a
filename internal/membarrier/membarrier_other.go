//go:build !linux

package membarrier

// Available is false: no asymmetric barrier on this platform.
func Available() bool { return false }

// Fence does nothing and returns false.
func Fence() bool { return false }
