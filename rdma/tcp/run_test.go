package tcp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

// A ring's batch of k slots (lossy: StampBusy into each, the bodies, each
// stamp) goes on the wire as one WRITE list of a run, a plain entry and a
// run: 16 bytes and 8 per slot for each run, not 24 per slot.
func TestPostSendBatch_StampsTravelAsRuns(t *testing.T) {
	const k, slot = 64, 96
	q, src, dst := postOnly(t, 2048)
	base := dst.Remote().Addr
	var wrs []rdma.WorkRequest
	w := func(off, n int, to uint64) {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(src, off, n), Remote: rdma.RemoteAddr{Addr: to, RKey: dst.RKey()}})
	}
	for j := 0; j < k; j++ {
		w(0, 8, base+uint64(j*slot))
	}
	w(8192+8, k*slot-8, base+8)
	for j := 0; j < k; j++ {
		w(1024+8*j, 8, base+uint64(j*slot))
	}
	w(0, 8, base+1<<16) // an 8-byte WRITE off the stride: an entry of its own
	n, err := q.PostSendBatch(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)

	frame := q.tx.buf[:q.tx.w]
	h, err := decodeRequest(frame[:reqHeaderLen], 1<<20)
	require.NoError(t, err)
	assert.Equal(t, opWriteList, h.op)
	assert.Equal(t, uint32(2*k+2), h.imm)
	bodyLen := k*slot - 8
	assert.Equal(t, uint32(3*listElemLen+2*8*k+bodyLen+listElemLen+8), h.len)
	require.Len(t, frame, reqHeaderLen+int(h.len))
	list := frame[reqHeaderLen:]
	require.NoError(t, checkList(list, h.imm))
	var got []listElem
	for len(list) > 0 {
		e, _, rest, err := nextElem(list)
		require.NoError(t, err)
		got = append(got, e)
		list = rest
	}
	assert.Equal(t, []listElem{
		{raddr: base, len: 8 * k, count: k, stride: slot},
		{raddr: base + 8, len: uint32(bodyLen)},
		{raddr: base, len: 8 * k, count: k, stride: slot},
		{raddr: base + 1<<16, len: 8},
	}, got)
}
