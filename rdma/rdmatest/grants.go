package rdmatest

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var grantTests = []test{
	{"QPCannotTouchRegionGrantedToAnother", testGrantOtherQP},
	{"ReadOnlyGrant_WriteAndAtomicRefused", testGrantReadOnly},
	{"RegionRegisteredLater_NotGrantedNotReachable", testGrantLaterRegion},
	{"WrongRKey_ClosesTheQueuePair", testWrongRKeyCloses},
	{"Grant_BadArguments_Refused", testGrantBad},
	{"SubRangeGrant_RestUnreachable", testGrantRange},
	{"RKeyOfAnotherQPsGrant_CarriesNoneOfItsRights", testGrantOtherQPSameRegion},
	{"RegionsOwnRKey_ReachesOnlyTheQPsGrant", testGrantRegionKey},
	{"SubRangeGrant_GrantUnits_RestUnmappable", testGrantUnits},
}

// granted is two connected QPs (a on devA, b on devB) where b's peer may
// reach only what b was granted before it connected.
type granted struct {
	a, b     rdma.QueuePair
	cqA, cqB rdma.CompletionQueue
	local    rdma.MemoryRegion
	// rr is what each Grant returned: the RemoteRegion b's peer names the
	// region by (on verbs a memory window's rkey, not the region's).
	rr map[rdma.MemoryRegion]rdma.RemoteRegion
}

// grantedPair connects a new QP of devA to a new QP of devB that was first
// granted each region in grants with its access. It skips the test on a
// device that cannot confine a queue pair (a verbs NIC without type 2B
// memory windows: Grant returns rdma.ErrNotSupported there).
func grantedPair(t *testing.T, devA, devB rdma.Device, grants map[rdma.MemoryRegion]rdma.Access) *granted {
	t.Helper()
	if !devB.Caps().GrantPerQP {
		t.Skipf("%s device cannot confine a queue pair (Caps.GrantPerQP false)", devB.Provider())
	}
	g := &granted{rr: map[rdma.MemoryRegion]rdma.RemoteRegion{}}
	var err error
	g.cqA, err = devA.CreateCQ(64)
	require.NoError(t, err)
	g.cqB, err = devB.CreateCQ(64)
	require.NoError(t, err)
	g.a, err = devA.CreateQP(rdma.QPConfig{SendCQ: g.cqA, RecvCQ: g.cqA, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	g.b, err = devB.CreateQP(rdma.QPConfig{SendCQ: g.cqB, RecvCQ: g.cqB, SendDepth: 16, RecvDepth: 4})
	require.NoError(t, err)
	for mr, acc := range grants {
		rr, err := g.b.Grant(mr, acc)
		require.NoError(t, err)
		assert.Equal(t, uint64(len(mr.Bytes())), rr.Len)
		assert.Equal(t, mr.Addr(), rr.Addr)
		g.rr[mr] = rr
	}
	connect(t, g.a, g.b)
	g.local, err = devA.RegisterMemory(4096, rdma.AccessLocalWrite)
	require.NoError(t, err)
	fillRandom(t, g.local.Bytes())
	return g
}

// writeTo is a 64-byte WRITE to the start of mr, named as g.b granted it
// (or by the region's own rkey, if it was not granted to g.b).
func writeTo(g *granted, mr rdma.MemoryRegion) rdma.WorkRequest {
	return rdma.WorkRequest{ID: 5, Op: rdma.OpWrite, Local: rdma.LocalSGE(g.local, 0, 64), Remote: g.at(mr, 0)}
}

// at is off bytes into mr as g.b's peer names it.
func (g *granted) at(mr rdma.MemoryRegion, off int) rdma.RemoteAddr {
	if rr, ok := g.rr[mr]; ok {
		return rdma.RemoteAddr{Addr: rr.Addr + uint64(off), RKey: rr.RKey}
	}
	return remote(mr, off)
}

// skipDeviceWideKeys skips a case that names a region by its own rkey on a
// queue pair it was never granted to, where that rkey is valid on every
// queue pair of the device: a verbs device opened with open regions
// (verbs.Config.OpenRegions, or one without type 2B memory windows), whose
// regions' rkeys are valid throughout the protection domain. Where windows
// confine QPs verbs registers regions grant-only (Caps.GrantOnly) and the
// case runs.
func skipDeviceWideKeys(t *testing.T, p Provider, d rdma.Device) {
	if p.Name == rdma.ProviderVerbs && !d.Caps().GrantOnly {
		t.Skip("verbs with open regions: a memory region's own rkey is valid on every QP of its protection domain (Caps.GrantOnly false; SECURITY.md)")
	}
}

func targetRegion(t *testing.T, d rdma.Device, access rdma.Access) rdma.MemoryRegion {
	t.Helper()
	mr, err := d.RegisterMemory(4096, rdma.AccessLocalWrite|access)
	require.NoError(t, err)
	fillRandom(t, mr.Bytes())
	return mr
}

// Two QPs of one device, each granted its own region: each peer reaches its
// own, and the other's rkey fails (the memory untouched) for every op.
func testGrantOtherQP(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r1, r2 := targetRegion(t, devB, rdma.AccessRemote), targetRegion(t, devB, rdma.AccessRemote)
	g1 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemote})
	assert.Equal(t, rdma.StatusSuccess, do(t, g1.a, g1.cqA, writeTo(g1, r1)).Status, "own grant")
	assert.Equal(t, g1.local.Bytes()[:64], r1.Bytes()[:64])
	for _, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpRead, rdma.OpFetchAndAdd, rdma.OpCompareAndSwap} {
		t.Run(op.String(), func(t *testing.T) {
			g2 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r2: rdma.AccessRemote})
			before := bytes.Clone(r1.Bytes())
			// r1 as g1's peer names it: the rkey granted to another QP
			wr := rdma.WorkRequest{ID: 9, Op: op, Local: rdma.LocalSGE(g2.local, 0, 8), Remote: g1.at(r1, 0), Add: 1, Compare: u64(r1.Bytes()), Swap: 7}
			c := do(t, g2.a, g2.cqA, wr)
			assert.Equal(t, rdma.StatusRemoteAccess, c.Status, "%s on a region granted to another QP", op)
			assert.Equal(t, before, r1.Bytes(), "memory of another QP's grant changed")
			waitState(t, g2.a, rdma.QPError)
		})
	}
}

// A read-only grant of a region that allows everything: reads work,
// writes and atomics fail and change nothing.
func testGrantReadOnly(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r := targetRegion(t, devB, rdma.AccessRemote)
	for _, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpFetchAndAdd} {
		t.Run(op.String(), func(t *testing.T) {
			g := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r: rdma.AccessRemoteRead})
			rd := rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: rdma.LocalSGE(g.local, 0, 64), Remote: g.at(r, 0)}
			require.Equal(t, rdma.StatusSuccess, do(t, g.a, g.cqA, rd).Status)
			assert.Equal(t, r.Bytes()[:64], g.local.Bytes()[:64])
			before := bytes.Clone(r.Bytes())
			wr := rdma.WorkRequest{ID: 2, Op: op, Local: rdma.LocalSGE(g.local, 0, 8), Remote: g.at(r, 64), Add: 1}
			assert.Equal(t, rdma.StatusRemoteAccess, do(t, g.a, g.cqA, wr).Status, "%s through a read-only grant", op)
			assert.Equal(t, before, r.Bytes())
		})
	}
}

// A region registered after a confined QP connected is not reachable
// through it until it is granted; then it is.
func testGrantLaterRegion(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	skipDeviceWideKeys(t, p, devB)
	r1 := targetRegion(t, devB, rdma.AccessRemote)
	g := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemoteWrite})
	late := targetRegion(t, devB, rdma.AccessRemote)
	before := bytes.Clone(late.Bytes())
	g2 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r1: rdma.AccessRemoteWrite})
	assert.Equal(t, rdma.StatusRemoteAccess, do(t, g2.a, g2.cqA, writeTo(g2, late)).Status, "a region granted to nobody")
	assert.Equal(t, before, late.Bytes())
	rr, err := g.b.Grant(late, rdma.AccessRemoteWrite)
	require.NoError(t, err)
	g.rr[late] = rr
	assert.Equal(t, rdma.StatusSuccess, do(t, g.a, g.cqA, writeTo(g, late)).Status, "granted after connect")
	assert.Equal(t, g.local.Bytes()[:64], late.Bytes()[:64])
}

// A request naming an rkey the peer may not use fails, and the queue pair
// it reached goes to ERR too: the connection is closed, so a peer cannot
// keep guessing on it.
func testWrongRKeyCloses(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	ok := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 8), Remote: remote(x.target, 0)}
	require.Equal(t, rdma.StatusSuccess, do(t, x.a, x.cqA, ok).Status)
	bad := ok
	bad.ID, bad.Remote.RKey = 2, x.target.RKey()^0x5a5a5a5a
	assert.Equal(t, rdma.StatusRemoteAccess, do(t, x.a, x.cqA, bad).Status)
	waitState(t, x.a, rdma.QPError)
	waitState(t, x.b, rdma.QPError)
}

func testGrantBad(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	cq, err := devB.CreateCQ(8)
	require.NoError(t, err)
	qp, err := devB.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4})
	require.NoError(t, err)
	other := targetRegion(t, devA, rdma.AccessRemote)
	ro := targetRegion(t, devB, rdma.AccessRemoteRead)
	for name, c := range map[string]struct {
		mr  rdma.MemoryRegion
		acc rdma.Access
	}{
		"another device": {other, rdma.AccessRemoteRead},
		"local right":    {ro, rdma.AccessLocalWrite},
		"none":           {ro, 0},
		"beyond region":  {ro, rdma.AccessRemoteWrite},
	} {
		_, err := qp.Grant(c.mr, c.acc)
		assert.ErrorIs(t, err, rdma.ErrGrant, name)
		_, err = qp.GrantRange(c.mr, 0, 64, c.acc)
		assert.ErrorIs(t, err, rdma.ErrGrant, "range: "+name)
	}
	for _, r := range [][2]int{{-1, 64}, {0, 0}, {0, -8}, {4096, 1}, {4000, 97}, {1 << 62, 1 << 62}} {
		_, err := qp.GrantRange(ro, r[0], r[1], rdma.AccessRemoteRead)
		assert.ErrorIs(t, err, rdma.ErrGrant, "%d bytes at %d of 4096", r[1], r[0])
	}
	require.NoError(t, ro.Close())
	_, err = qp.Grant(ro, rdma.AccessRemoteRead)
	assert.ErrorIs(t, err, rdma.ErrGrant, "closed region")
}

// A confined QP granted 64 bytes in the middle of a region reaches those
// bytes, with the granted rights, and nothing else of the region: every op
// before, after or across an edge of the range fails, the memory untouched,
// and the queue pair goes to ERR. A second grant of another range of the
// same region is refused; one of the same range adds rights.
func testGrantRange(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	if !devB.Caps().GrantPerQP {
		t.Skipf("%s cannot confine a queue pair (Caps.GrantPerQP false)", p.Name)
	}
	const off, n = 1024, 64
	r := targetRegion(t, devB, rdma.AccessRemote)
	type ranged struct {
		g  *granted
		rr rdma.RemoteRegion
	}
	open := func(t *testing.T, access rdma.Access) ranged {
		t.Helper()
		g := &granted{rr: map[rdma.MemoryRegion]rdma.RemoteRegion{}}
		var err error
		g.cqA, err = devA.CreateCQ(64)
		require.NoError(t, err)
		g.cqB, err = devB.CreateCQ(64)
		require.NoError(t, err)
		g.a, err = devA.CreateQP(rdma.QPConfig{SendCQ: g.cqA, RecvCQ: g.cqA, SendDepth: 16, RecvDepth: 4})
		require.NoError(t, err)
		g.b, err = devB.CreateQP(rdma.QPConfig{SendCQ: g.cqB, RecvCQ: g.cqB, SendDepth: 16, RecvDepth: 4, Confined: true})
		require.NoError(t, err)
		rr, err := g.b.GrantRange(r, off, n, access)
		require.NoError(t, err)
		require.Equal(t, r.Addr()+off, rr.Addr)
		require.Equal(t, uint64(n), rr.Len)
		connect(t, g.a, g.b)
		g.local, err = devA.RegisterMemory(4096, rdma.AccessLocalWrite)
		require.NoError(t, err)
		fillRandom(t, g.local.Bytes())
		return ranged{g, rr}
	}
	at := func(x ranged, delta int) rdma.RemoteAddr {
		return rdma.RemoteAddr{Addr: uint64(int64(x.rr.Addr) + int64(delta)), RKey: x.rr.RKey}
	}

	t.Run("Inside", func(t *testing.T) {
		x := open(t, rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic)
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.g.local, 0, n), Remote: at(x, 0)}
		require.Equal(t, rdma.StatusSuccess, do(t, x.g.a, x.g.cqA, wr).Status, "a WRITE of the whole range")
		assert.Equal(t, x.g.local.Bytes()[:n], r.Bytes()[off:off+n])
		word := u64(r.Bytes()[off+n-8:])
		faa := rdma.WorkRequest{ID: 2, Op: rdma.OpFetchAndAdd, Local: rdma.LocalSGE(x.g.local, 0, 8), Remote: at(x, n-8), Add: 3}
		require.Equal(t, rdma.StatusSuccess, do(t, x.g.a, x.g.cqA, faa).Status, "an atomic on the range's last word")
		assert.Equal(t, word+3, u64(r.Bytes()[off+n-8:]))
		rd := rdma.WorkRequest{ID: 3, Op: rdma.OpRead, Local: rdma.LocalSGE(x.g.local, 0, 8), Remote: at(x, 0)}
		assert.Equal(t, rdma.StatusRemoteAccess, do(t, x.g.a, x.g.cqA, rd).Status, "a READ through a write-and-atomic grant")
	})
	for _, c := range []struct {
		name  string
		op    rdma.Opcode
		delta int // from the range's start
		len   int
	}{
		{"WriteBefore", rdma.OpWrite, -64, 64},
		{"WriteAcrossStart", rdma.OpWrite, -8, 16},
		{"WriteAfter", rdma.OpWrite, n, 64},
		{"WriteAcrossEnd", rdma.OpWrite, n - 8, 16},
		{"WriteRegionStart", rdma.OpWrite, -off, 8},
		{"ReadAfter", rdma.OpRead, n, 8},
		{"ReadAcrossEnd", rdma.OpRead, 8, n},
		{"AtomicBefore", rdma.OpFetchAndAdd, -8, 8},
		{"AtomicAfter", rdma.OpCompareAndSwap, n, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := open(t, rdma.AccessRemote)
			before := bytes.Clone(r.Bytes())
			wr := rdma.WorkRequest{ID: 9, Op: c.op, Local: rdma.LocalSGE(x.g.local, 0, c.len), Remote: at(x, c.delta),
				Add: 1, Compare: u64(r.Bytes()[off+c.delta:]), Swap: 7}
			assert.Equal(t, rdma.StatusRemoteAccess, do(t, x.g.a, x.g.cqA, wr).Status, "%s of %d bytes at %+d of the range", c.op, c.len, c.delta)
			assert.Equal(t, before, r.Bytes(), "memory outside the granted range changed")
			waitState(t, x.g.a, rdma.QPError)
		})
	}
	t.Run("OneRangePerRegion", func(t *testing.T) {
		x := open(t, rdma.AccessRemoteRead)
		_, err := x.g.b.GrantRange(r, 0, 4096, rdma.AccessRemoteRead)
		assert.ErrorIs(t, err, rdma.ErrGrant, "another range of a region granted in part")
		_, err = x.g.b.Grant(r, rdma.AccessRemoteRead)
		assert.ErrorIs(t, err, rdma.ErrGrant, "all of a region granted in part")
		rr, err := x.g.b.GrantRange(r, off, n, rdma.AccessRemoteWrite)
		require.NoError(t, err, "the same range, more rights")
		wr := rdma.WorkRequest{ID: 4, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.g.local, 0, 8), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}}
		assert.Equal(t, rdma.StatusSuccess, do(t, x.g.a, x.g.cqA, wr).Status, "a WRITE after the grant widened")
		assert.Equal(t, x.g.local.Bytes()[:8], r.Bytes()[off:off+8])
	})
}

// Two QPs of one device granted the same region, one with every right and
// one read-only: the first's rkey, used on the second (both connected to
// the same peer device), carries none of the first's rights. A WRITE or an
// atomic through it fails, the memory untouched, and the second QP goes to
// ERR. (On verbs the rkey is a window bound to the first QP and fails on
// the second whatever the op; on shm and tcp it is the region's, checked
// against the second QP's own grant.)
func testGrantOtherQPSameRegion(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	r := targetRegion(t, devB, rdma.AccessRemote)
	g1 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r: rdma.AccessRemote})
	require.Equal(t, rdma.StatusSuccess, do(t, g1.a, g1.cqA, writeTo(g1, r)).Status, "own grant")
	for _, op := range []rdma.Opcode{rdma.OpWrite, rdma.OpWriteImm, rdma.OpFetchAndAdd, rdma.OpCompareAndSwap} {
		t.Run(op.String(), func(t *testing.T) {
			g2 := grantedPair(t, devA, devB, map[rdma.MemoryRegion]rdma.Access{r: rdma.AccessRemoteRead})
			rd := rdma.WorkRequest{ID: 1, Op: rdma.OpRead, Local: rdma.LocalSGE(g2.local, 0, 8), Remote: g2.at(r, 0)}
			require.Equal(t, rdma.StatusSuccess, do(t, g2.a, g2.cqA, rd).Status, "the second QP's own read grant")
			before := bytes.Clone(r.Bytes())
			wr := rdma.WorkRequest{ID: 9, Op: op, Local: rdma.LocalSGE(g2.local, 0, 8), Remote: g1.at(r, 8), Add: 1,
				Compare: u64(r.Bytes()[8:]), Swap: 7, Imm: 3}
			if op == rdma.OpWriteImm {
				require.NoError(t, g2.b.PostRecv(&rdma.RecvRequest{ID: 1}))
			}
			assert.Equal(t, rdma.StatusRemoteAccess, do(t, g2.a, g2.cqA, wr).Status, "%s with another QP's rkey", op)
			assert.Equal(t, before, r.Bytes(), "memory changed through another QP's grant")
			waitState(t, g2.a, rdma.QPError)
		})
	}
}

// A confined QP granted 64 bytes of a region (a window of it): the
// region's own rkey reaches nothing outside that range on it, for every op,
// the memory untouched and the QP to ERR; inside the range it works only
// where the grant names the region by that very rkey (shm, tcp), and fails
// where a region's own rkey grants nothing (Caps.GrantOnly: verbs with
// memory windows), so an rkey sniffed from a descriptor is of no use.
func testGrantRegionKey(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	if !devB.Caps().GrantPerQP {
		t.Skipf("%s cannot confine a queue pair (Caps.GrantPerQP false)", p.Name)
	}
	skipDeviceWideKeys(t, p, devB)
	const off, n = 2048, 64
	r := targetRegion(t, devB, rdma.AccessRemote)
	open := func(t *testing.T) (*granted, rdma.RemoteRegion) {
		t.Helper()
		g := &granted{rr: map[rdma.MemoryRegion]rdma.RemoteRegion{}}
		var err error
		g.cqA, err = devA.CreateCQ(64)
		require.NoError(t, err)
		g.cqB, err = devB.CreateCQ(64)
		require.NoError(t, err)
		g.a, err = devA.CreateQP(rdma.QPConfig{SendCQ: g.cqA, RecvCQ: g.cqA, SendDepth: 16, RecvDepth: 4})
		require.NoError(t, err)
		g.b, err = devB.CreateQP(rdma.QPConfig{SendCQ: g.cqB, RecvCQ: g.cqB, SendDepth: 16, RecvDepth: 4, Confined: true})
		require.NoError(t, err)
		rr, err := g.b.GrantRange(r, off, n, rdma.AccessRemote)
		require.NoError(t, err)
		connect(t, g.a, g.b)
		g.local, err = devA.RegisterMemory(4096, rdma.AccessLocalWrite)
		require.NoError(t, err)
		fillRandom(t, g.local.Bytes())
		return g, rr
	}
	own := func(at int) rdma.RemoteAddr { return remote(r, at) } // the region's own rkey, as its descriptor carries it
	for _, c := range []struct {
		name string
		op   rdma.Opcode
		at   int
	}{
		{"WriteRegionStart", rdma.OpWrite, 0},
		{"WriteAfterRange", rdma.OpWrite, off + n},
		{"ReadBeforeRange", rdma.OpRead, off - 64},
		{"AtomicAfterRange", rdma.OpFetchAndAdd, off + n},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := open(t)
			before := bytes.Clone(r.Bytes())
			wr := rdma.WorkRequest{ID: 7, Op: c.op, Local: rdma.LocalSGE(g.local, 0, 8), Remote: own(c.at), Add: 1}
			assert.Equal(t, rdma.StatusRemoteAccess, do(t, g.a, g.cqA, wr).Status, "%s at %d by the region's own rkey", c.op, c.at)
			assert.Equal(t, before, r.Bytes(), "memory outside the QP's grant changed")
			waitState(t, g.a, rdma.QPError)
		})
	}
	t.Run("InsideRange", func(t *testing.T) {
		g, rr := open(t)
		before := bytes.Clone(r.Bytes())
		wr := rdma.WorkRequest{ID: 8, Op: rdma.OpWrite, Local: rdma.LocalSGE(g.local, 0, 8), Remote: own(off)}
		st := do(t, g.a, g.cqA, wr).Status
		switch {
		case devB.Caps().GrantOnly:
			require.NotEqual(t, r.RKey(), rr.RKey, "a grant-only device names a grant by its own rkey")
			assert.Equal(t, rdma.StatusRemoteAccess, st, "the region's own rkey on a grant-only device")
			assert.Equal(t, before, r.Bytes())
			waitState(t, g.a, rdma.QPError)
		default:
			require.Equal(t, r.RKey(), rr.RKey, "%s names a grant by the region's rkey (checked per QP)", p.Name)
			assert.Equal(t, rdma.StatusSuccess, st, "inside the grant, named as the grant names it")
			assert.Equal(t, g.local.Bytes()[:8], r.Bytes()[off:off+8])
		}
	})
}

// A region of memory in grant units (rdma.AllocMemory and Register, or
// rdma.RegisterMemory), granted
// in part: the peer reaches the granted range (and, mapping directly, no
// more of it), and a hostile peer that ignores its grants holds no file of
// any unit the range does not cover, nor a writable one of a read-only
// grant. Each page starts with a random tag, so a held file that maps a
// page it was not granted is caught whatever its offset.
func testGrantUnits(t *testing.T, p Provider) {
	devA, devB := openDevice(t, p), openDevice(t, p)
	if !devB.Caps().GrantPerQP {
		t.Skipf("%s cannot confine a queue pair (Caps.GrantPerQP false)", p.Name)
	}
	ps := os.Getpagesize()
	const units = 4
	cfg := rdma.MemoryConfig{GrantUnit: ps, GrantUnits: units}
	t.Run("AllocMemory", func(t *testing.T) {
		mem, err := rdma.AllocMemory("rdmatest-units", units*ps, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = mem.Close() })
		r, err := devB.Register(mem.Bytes(), rdma.AccessLocalWrite|rdma.AccessRemote)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		testGrantUnitsOf(t, p, devA, devB, r)
	})
	t.Run("RegisterMemory", func(t *testing.T) {
		r, err := rdma.RegisterMemory(devB, units*ps, rdma.AccessLocalWrite|rdma.AccessRemote, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		testGrantUnitsOf(t, p, devA, devB, r)
	})
}

// testGrantUnitsOf is testGrantUnits of r, a region of devB of 4 pages in
// units of a page.
func testGrantUnitsOf(t *testing.T, p Provider, devA, devB rdma.Device, r rdma.MemoryRegion) {
	ps := os.Getpagesize()
	const units, granted = 4, 2
	off, n := granted*ps+1024, 64
	fillRandom(t, r.Bytes())
	tag := func(page int) []byte { return r.Bytes()[page*ps : page*ps+16] }

	confined := func(t *testing.T, access rdma.Access) (rdma.QueuePair, rdma.RemoteRegion) {
		cq, err := devB.CreateCQ(8)
		require.NoError(t, err)
		b, err := devB.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 1, Confined: true})
		require.NoError(t, err)
		rr, err := b.GrantRange(r, off, n, access)
		require.NoError(t, err)
		return b, rr
	}

	t.Run("Honest", func(t *testing.T) {
		b, rr := confined(t, rdma.AccessRemoteWrite)
		cq, err := devA.CreateCQ(8)
		require.NoError(t, err)
		a, err := devA.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 1})
		require.NoError(t, err)
		connect(t, a, b)
		local, err := devA.RegisterMemory(4096, rdma.AccessLocalWrite)
		require.NoError(t, err)
		fillRandom(t, local.Bytes())
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(local, 0, n), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}}
		require.Equal(t, rdma.StatusSuccess, do(t, a, cq, wr).Status, "a WRITE of the granted range")
		assert.Equal(t, local.Bytes()[:n], r.Bytes()[off:off+n])
		if dm, ok := a.(rdma.DirectMapper); ok {
			for _, page := range []int{0, granted - 1, granted + 1, units - 1} {
				_, err := dm.Direct(rdma.RemoteRegion{Addr: r.Addr() + uint64(page*ps), RKey: rr.RKey, Len: 8}, rdma.AccessRemoteWrite)
				assert.ErrorIs(t, err, rdma.ErrDirect, "mapping page %d directly, outside the grant", page)
			}
		}
	})
	// The memory reads and writes as one across units: a range grant over a
	// unit boundary, and an unconfined peer's WRITE across every unit.
	t.Run("AcrossUnits", func(t *testing.T) {
		local, err := devA.RegisterMemory(units*ps, rdma.AccessLocalWrite)
		require.NoError(t, err)
		fillRandom(t, local.Bytes())
		cq, err := devB.CreateCQ(8)
		require.NoError(t, err)
		b, err := devB.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 1, Confined: true})
		require.NoError(t, err)
		lo, hi := ps+ps/2, 3*ps+8
		rr, err := b.GrantRange(r, lo, hi-lo, rdma.AccessRemoteWrite)
		require.NoError(t, err)
		cqA, err := devA.CreateCQ(8)
		require.NoError(t, err)
		a, err := devA.CreateQP(rdma.QPConfig{SendCQ: cqA, RecvCQ: cqA, SendDepth: 4, RecvDepth: 1})
		require.NoError(t, err)
		connect(t, a, b)
		before := bytes.Clone(r.Bytes())
		wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(local, 0, hi-lo), Remote: rdma.RemoteAddr{Addr: rr.Addr, RKey: rr.RKey}}
		require.Equal(t, rdma.StatusSuccess, do(t, a, cqA, wr).Status, "a WRITE of a range over three units")
		assert.Equal(t, local.Bytes()[:hi-lo], r.Bytes()[lo:hi])
		assert.Equal(t, before[:lo], r.Bytes()[:lo], "before the range")
		assert.Equal(t, before[hi:], r.Bytes()[hi:], "after the range")

		x := newPair(t, p, pairOpts{})
		mr, err := x.devB.Register(r.Bytes()[ps/2:], rdma.AccessLocalWrite|rdma.AccessRemote)
		require.NoError(t, err, "register an unaligned part of the units on another device")
		t.Cleanup(func() { _ = mr.Close() })
		xl, err := x.devA.RegisterMemory(units*ps, rdma.AccessLocalWrite)
		require.NoError(t, err)
		fillRandom(t, xl.Bytes())
		n := len(mr.Bytes())
		all := rdma.WorkRequest{ID: 2, Op: rdma.OpWrite, Local: rdma.LocalSGE(xl, 0, n), Remote: remote(mr, 0)}
		require.Equal(t, rdma.StatusSuccess, do(t, x.a, x.cqA, all).Status, "an unconfined peer's WRITE of every unit")
		assert.Equal(t, xl.Bytes()[:n], r.Bytes()[ps/2:])
	})
	t.Run("Hostile", func(t *testing.T) {
		if p.Hostile == nil {
			t.Skipf("%s hands a peer no memory to map (its ops are applied by a responder or the NIC); the Honest case and SubRangeGrant_RestUnreachable cover it", p.Name)
		}
		for _, c := range []struct {
			name   string
			access rdma.Access
		}{{"ReadWrite", rdma.AccessRemoteWrite | rdma.AccessRemoteAtomic}, {"ReadOnly", rdma.AccessRemoteRead}} {
			t.Run(c.name, func(t *testing.T) {
				b, _ := confined(t, c.access)
				held, err := p.Hostile(b)
				require.NoError(t, err)
				total := 0
				for _, h := range held {
					t.Cleanup(h.Close)
					total += len(h.Mem)
					if c.access == rdma.AccessRemoteRead {
						assert.False(t, h.Writable, "a file of a read-only grant can be mapped writable")
					}
					for o := 0; o+16 <= len(h.Mem); o += ps {
						for page := range units {
							if page != granted {
								assert.NotEqual(t, tag(page), h.Mem[o:o+16], "a held file maps page %d, not granted (it holds %d bytes)", page, len(h.Mem))
							}
						}
					}
				}
				assert.LessOrEqual(t, total, ps, "the peer holds more than the one unit its range covers")
				found := false
				for _, h := range held {
					for o := 0; o+16 <= len(h.Mem); o += ps {
						found = found || bytes.Equal(h.Mem[o:o+16], tag(granted))
					}
				}
				assert.True(t, found, "the peer does hold the granted unit (else this case proves nothing)")
			})
		}
	})
}
