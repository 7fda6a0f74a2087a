package rdma

import (
	"fmt"
	"strings"
)

// Access is the set of rights a MemoryRegion grants, as ibv_access_flags.
type Access uint32

const (
	// AccessLocalWrite lets the local device write into the region: the
	// destination of a READ or of an atomic's original value, a RECV buffer.
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteWrite lets peers WRITE and WRITE_WITH_IMM into the region.
	AccessRemoteWrite
	// AccessRemoteRead lets peers READ the region.
	AccessRemoteRead
	// AccessRemoteAtomic lets peers COMPARE_AND_SWAP and FETCH_AND_ADD on the
	// region's aligned 8-byte words.
	AccessRemoteAtomic
)

// AccessRemote is every remote right.
const AccessRemote = AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// Has reports whether a grants every right in want.
func (a Access) Has(want Access) bool { return a&want == want }

func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var parts []string
	for _, f := range []struct {
		bit  Access
		name string
	}{
		{AccessLocalWrite, "local-write"},
		{AccessRemoteWrite, "remote-write"},
		{AccessRemoteRead, "remote-read"},
		{AccessRemoteAtomic, "remote-atomic"},
	} {
		if a&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	return strings.Join(parts, "|")
}

// CheckGrant is what every provider checks of a Grant of access on a
// region that gives have: remote rights only, at least one, all of them in
// have.
func CheckGrant(have, access Access) error {
	switch {
	case access == 0:
		return fmt.Errorf("%w: no right granted", ErrGrant)
	case access&^AccessRemote != 0:
		return fmt.Errorf("%w: %s includes local rights", ErrGrant, access)
	case !have.Has(access):
		return fmt.Errorf("%w: %s, but the region gives only %s", ErrGrant, access, have)
	}
	return nil
}

// CheckGrantRange is what every provider checks of a GrantRange of n bytes
// at offset off of a region of size bytes: a non-empty range inside it.
func CheckGrantRange(size, off, n int) error {
	if off < 0 || n <= 0 || off > size || n > size-off {
		return fmt.Errorf("%w: %d bytes at offset %d of a region of %d bytes", ErrGrant, n, off, size)
	}
	return nil
}
