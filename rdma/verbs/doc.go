// Package verbs is the rdma provider over libibverbs, for InfiniBand, RoCE
// and iWARP NICs. It is a thin mapping of the rdma API onto ibverbs: one cgo
// call per PostSend, PostRecv and Poll (a poll reaps up to 64 completions).
//
// It needs cgo, Linux and the build tag `verbs` (and Debian's libibverbs-dev
// to build):
//
//	go test -tags verbs ./rdma/verbs/
//
// Without the tag, Open returns an error wrapping rdma.ErrNotSupported that
// says how to build it. Without an RDMA device, Open returns an error wrapping
// rdma.ErrNoDevice and the tests skip, saying so.
//
// Per-QP grants (rdma.QueuePair.Grant, GrantRange) are type 2 memory
// windows, bound to the granted QP by an IBV_WR_BIND_MW once it is in RTS
// (a grant made before Connect is bound at its end); Caps().GrantPerQP is
// set when the device reports IBV_DEVICE_MEM_WINDOW_TYPE_2B. A window's
// rkey works on its QP only. Such a device also sets Caps().GrantOnly:
// regions with remote rights are registered for local access and
// IBV_ACCESS_MW_BIND only, so the region's own rkey (RKey, Remote) grants
// no remote access on any QP, and a QP never granted anything reaches
// nothing (SECURITY.md). Config.OpenRegions registers them with their
// remote rights instead (the region's rkey then works on every QP of the
// protection domain, as on a device without type 2B windows), for code
// whose peers name regions by their own rkeys.
//
// Verbs atomics may be atomic only against other atomics of the same NIC
// (IBV_ATOMIC_HCA); Caps().Atomic reports what the device grants, and a device
// without atomics (AtomicNone) cannot be a topic's home.
package verbs

import "github.com/rs/zerolog"

// Config selects the device and port.
type Config struct {
	HostID   string // default: hostname
	Device   string // device name such as "mlx5_0"; default: the first
	Port     int    // port number; default 1
	GIDIndex int    // GID table index for RoCE; default 0
	// OpenRegions: give a region's own rkey its remote rights even where
	// memory windows confine QPs (Caps.GrantOnly false): every QP of the
	// protection domain then reaches every remote region by its rkey.
	// Only for peers that are never granted (the conformance suite's
	// general cases); tickbus itself grants every peer.
	OpenRegions bool
	Logger      zerolog.Logger // control paths only
}
