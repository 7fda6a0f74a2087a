//go:build linux

package membarrier

import (
	"sync"

	"golang.org/x/sys/unix"
)

// From linux/membarrier.h.
const (
	cmdPrivateExpedited         = 1 << 3
	cmdRegisterPrivateExpedited = 1 << 4
)

var (
	once sync.Once
	ok   bool
)

// Available reports whether Fence works here: the kernel has membarrier(2)
// with private expedited barriers (Linux 4.14) and this process is
// registered for them (the first call registers it). A seccomp profile may
// refuse the syscall: then false.
func Available() bool {
	once.Do(func() {
		_, _, e := unix.Syscall(unix.SYS_MEMBARRIER, cmdRegisterPrivateExpedited, 0, 0)
		if e != 0 {
			return
		}
		_, _, e = unix.Syscall(unix.SYS_MEMBARRIER, cmdPrivateExpedited, 0, 0)
		ok = e == 0
	})
	return ok
}

// Fence runs a full memory barrier on every CPU that runs a thread of this
// process (and orders this thread's own accesses around it). It returns
// false, having done nothing, where Available is false.
func Fence() bool {
	if !Available() {
		return false
	}
	_, _, e := unix.Syscall(unix.SYS_MEMBARRIER, cmdPrivateExpedited, 0, 0)
	return e == 0
}
