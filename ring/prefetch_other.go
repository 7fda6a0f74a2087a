//go:build !amd64

package ring

func prefetchSlot(*byte) {}
