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
