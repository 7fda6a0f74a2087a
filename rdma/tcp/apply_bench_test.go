package tcp

import (
	"bufio"
	"io"
	"runtime"
	"testing"

	"github.com/tickbus/tickbus/rdma"
)

// BenchmarkApplyList_Run64 is the responder's work for a ring's 64-tick
// batch, without the socket: one WRITE list of the 64 slots' bodies
// (128-byte slots) and the run of their 64 stamps, checked and applied to
// a region.
// It reports CPU-ns per tick and must report 0 allocs/op.
func BenchmarkApplyList_Run64(b *testing.B) { benchApplyList(b, 64) }

// BenchmarkApplyList_Tick is the responder's work for one tick's list
// (body, stamp) of a confined QP, as a subscriber's ring is: per tick on a
// single-tick stream. 0 allocs/op.
func BenchmarkApplyList_Tick(b *testing.B) { benchApplyList(b, 1) }

func benchApplyList(b *testing.B, slots int) {
	const slot = 128
	d, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	mr, err := d.RegisterMemory(4*slots*slot, rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		b.Fatal(err)
	}
	cq, err := d.CreateCQ(64)
	if err != nil {
		b.Fatal(err)
	}
	qpi, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64, RecvDepth: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := qpi.(*QP)
	// The list as PostSendBatch sends it: the body WRITE, then the stamps
	// (one in 16 signalled) as one run.
	base := mr.Remote().Addr
	var list []byte
	put := func(e listElem) {
		var eh [listElemLen]byte
		e.put(eh[:])
		list = append(append(list, eh[:]...), make([]byte, e.len)...)
	}
	put(listElem{raddr: base + 8, len: uint32(slots*slot - 8)})
	if slots == 1 {
		put(listElem{raddr: base, len: 8, flags: reqSignaled})
	} else {
		put(listElem{raddr: base, len: uint32(8 * slots), count: uint16(slots), stride: slot, flags: reqSignaled})
	}
	q.grants.Store(&grantTable{mr.RKey(): {lo: base, hi: base + uint64(len(mr.Bytes())), access: rdma.AccessRemoteWrite}})
	s := responder{q: q, bw: bufio.NewWriter(io.Discard), max: 1 << 20}
	h := request{op: opWriteList, seq: 1, rkey: mr.RKey(), imm: uint32(slots + 1), len: uint32(len(list))}
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu0 := threadCPU()
	for i := 0; i < b.N; i++ {
		if err := s.applyList(&h, list); err != nil {
			b.Fatal(err)
		}
		h.seq += uint64(slots + 1)
		s.ackUpto, s.wanted, s.now = 0, false, false
	}
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*slots), "cpu-ns/tick")
}
