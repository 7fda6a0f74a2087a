package shm

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func countMemfdMaps(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "memfd:tickbus-")
}

// TestDeviceClose_ReleasesEverything: after Close of two devices with
// connected QPs, regions pushed after Connect and posted receives, every
// goroutine, fd and mapping they made is gone.
func TestDeviceClose_ReleasesEverything(t *testing.T) {
	time.Sleep(10 * time.Millisecond) // let earlier tests' goroutines finish
	goroutines, fds, maps := runtime.NumGoroutine(), countFDs(t), countMemfdMaps(t)

	da, err := Open(Config{})
	require.NoError(t, err)
	db, err := Open(Config{})
	require.NoError(t, err)
	for range 3 {
		a, b := newTestQP(t, da, nil), newTestQP(t, db, nil)
		require.NoError(t, a.Connect(ctx5(t), b.LocalEndpoint()))
		require.NoError(t, b.Connect(ctx5(t), a.LocalEndpoint()))
		require.NoError(t, b.PostRecv(&rdma.RecvRequest{ID: 1}))
	}
	for range 3 {
		_, err := db.RegisterMemory(1<<16, rdma.AccessRemote)
		require.NoError(t, err)
		_, err = da.RegisterMemory(1<<16, rdma.AccessLocalWrite)
		require.NoError(t, err)
	}
	assert.Greater(t, countMemfdMaps(t), maps)
	require.NoError(t, da.Close())
	require.NoError(t, db.Close())

	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d, were %d:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
	}
	assert.LessOrEqual(t, countFDs(t), fds, "fds")
	assert.LessOrEqual(t, countMemfdMaps(t), maps, "memfd mappings")
}

// QPs of one device connected to the same peer device share one mapping
// of each of the peer's regions; the last one to let go unmaps it.
func TestRemoteMappings_SharedPerPeerDevice(t *testing.T) {
	da := openTestDevice(t, Config{})
	db := openTestDevice(t, Config{})
	r1, err := db.RegisterMemory(1<<16, rdma.AccessRemote)
	require.NoError(t, err)
	_, err = db.RegisterMemory(1<<16, rdma.AccessRemoteRead)
	require.NoError(t, err)
	refs := func() map[uint32]int {
		da.mapsMu.Lock()
		defer da.mapsMu.Unlock()
		m := map[uint32]int{}
		for k, r := range da.maps {
			m[k.rkey] = r.refs
		}
		return m
	}
	var qps []*QP
	for range 3 {
		a, b := newTestQP(t, da, nil), newTestQP(t, db, nil)
		require.NoError(t, a.Connect(ctx5(t), b.LocalEndpoint()))
		require.NoError(t, b.Connect(ctx5(t), a.LocalEndpoint()))
		qps = append(qps, a)
	}
	got := refs()
	assert.Len(t, got, 2, "one mapping per region")
	for k, n := range got {
		assert.Equal(t, 3, n, "rkey %#x", k)
	}
	late, err := db.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	assert.Equal(t, 3, refs()[late.RKey()], "a late region is shared too")
	require.NoError(t, r1.Close())
	_, still := refs()[r1.RKey()]
	assert.False(t, still, "deregistered: unmapped once every QP let go")
	require.NoError(t, qps[0].Close())
	assert.Equal(t, 2, refs()[late.RKey()])
	// The others still reach it through the shared mapping.
	cq := qps[1].sendCQ
	wr := rdma.WorkRequest{ID: 5, Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("shared"),
		Remote: rdma.RemoteAddr{Addr: late.Addr(), RKey: late.RKey()}}
	require.NoError(t, qps[1].PostSend(&wr))
	buf := make([]rdma.Completion, 1)
	require.Equal(t, 1, cq.Poll(buf))
	require.Equal(t, rdma.StatusSuccess, buf[0].Status)
	assert.Equal(t, "shared", string(late.Bytes()[:6]))
	require.NoError(t, qps[1].Close())
	require.NoError(t, qps[2].Close())
	assert.Empty(t, refs())
}
