package tcp_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// Quiet connections wait on the process's one epoll goroutine, not each in
// a blocked read(2): 40 connected pairs (160 connection readers) add only
// a handful of OS threads.
func TestDevice_QuietConnectionsHoldNoThreads(t *testing.T) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	da, db := openDevice(t, tcp.Config{ReadSpins: -1}), openDevice(t, tcp.Config{ReadSpins: -1})
	before := osThreads(t)
	const pairs = 40
	for i := 0; i < pairs; i++ {
		a, b := newSide(t, da, 4, all), newSide(t, db, 4, all)
		connect(t, a, b)
		wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled | rdma.FlagInline, Inline: []byte{1}, Remote: remote(b.MR, 0)}
		require.NoError(t, a.QP.PostSend(&wr))
		require.Equal(t, rdma.StatusSuccess, wait(t, a.CQ).Status)
	}
	time.Sleep(50 * time.Millisecond) // let every reader go quiet
	after := osThreads(t)
	assert.Less(t, after-before, 40, "threads %d → %d for %d connection readers", before, after, 4*pairs)
}
