package bench

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's CLOCK_MONOTONIC reading through the vDSO: no
// syscall, no allocation, and the same clock in every process on this host,
// so a publisher's stamp and a subscriber's reading can be subtracted across
// processes. (time.Now reads two clocks and is slower; unix.ClockGettime
// makes a real syscall.)
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
