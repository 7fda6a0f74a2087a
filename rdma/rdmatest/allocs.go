package rdmatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var allocTests = []test{
	{"PostSendAndPoll_ZeroAllocs", testZeroAllocs},
}

// testZeroAllocs checks that PostSend of each hot-path request and the
// Polls that reap it allocate nothing.
func testZeroAllocs(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	payload := make([]byte, 64)
	buf := make([]rdma.Completion, 4)
	var idle rdma.Yield
	cases := []struct {
		name string
		wr   rdma.WorkRequest
	}{
		{"WRITE 64B inline", rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: payload, Remote: remote(x.target, 128)}},
		{"WRITE 64B SGE", rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(x.local, 0, 64), Remote: remote(x.target, 128)}},
		{"WRITE 8B stamp", rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: payload[:8], Remote: remote(x.target, 0)}},
		{"READ 64B", rdma.WorkRequest{Op: rdma.OpRead, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(x.local, 64, 64), Remote: remote(x.target, 128)}},
		{"CAS", rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(x.local, 256, 8), Remote: remote(x.target, 256), Compare: 0, Swap: 0}},
		{"FAA", rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(x.local, 264, 8), Remote: remote(x.target, 264), Add: 1}},
	}
	for _, tc := range cases {
		wr := tc.wr
		var bad rdma.Status
		allocs := testing.AllocsPerRun(50, func() {
			if err := x.a.PostSend(&wr); err != nil {
				bad = rdma.StatusFatal
				return
			}
			for {
				n := x.cqA.Poll(buf)
				if n > 0 {
					if buf[0].Status != rdma.StatusSuccess {
						bad = buf[0].Status
					}
					return
				}
				idle.Idle(n)
			}
		})
		require.Equal(t, rdma.StatusSuccess, bad, tc.name)
		assert.Zero(t, allocs, "%s: allocs per PostSend+Poll", tc.name)
	}
	// Unsignalled requests, signalling every 16th, as the ring posts them.
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: payload, Remote: remote(x.target, 128)}
	i := 0
	allocs := testing.AllocsPerRun(160, func() {
		i++
		wr.Flags = rdma.FlagInline
		if i%16 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		for x.a.PostSend(&wr) != nil {
			idle.Idle(x.cqA.Poll(buf))
		}
		x.cqA.Poll(buf)
	})
	assert.Zero(t, allocs, "allocs per unsignalled WRITE")
}
