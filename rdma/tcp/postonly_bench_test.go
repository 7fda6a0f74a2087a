package tcp

import (
	"golang.org/x/sys/unix"
	"runtime"
	"testing"

	"github.com/tickbus/tickbus/rdma"
)

// postOnly is a QP in RTS with no connection, flusher or reaper: what a
// post costs the posting goroutine alone. After each post the benchmark
// plays the flusher and the reaper (everything written and answered).
func postOnly(b testing.TB, depth int) (*QP, rdma.MemoryRegion, rdma.MemoryRegion) {
	d, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	src, err := d.RegisterMemory(1<<20, rdma.AccessLocalWrite)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := d.RegisterMemory(1<<20, rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		b.Fatal(err)
	}
	cq, err := d.CreateCQ(8192)
	if err != nil {
		b.Fatal(err)
	}
	qpi, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: depth, RecvDepth: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := qpi.(*QP)
	q.maxMsg = uint32(d.cfg.MaxMsgSize)
	q.tx = newTxRing(d.cfg.SendBuffer)
	q.state.Store(uint32(rdma.QPReadyToSend))
	return q, src, dst
}

// drained plays the flusher and the reaper: all posted is written and
// answered, the completion credits of n requests back at the CQ. The
// benchmarks call it every 16 posts, so that its atomics are a small part
// of what they measure.
func (q *QP) drained(n int) {
	q.tx.rpos.Store(q.tx.wpos.Load())
	q.consumed.Store(q.npos)
	q.retired.Store(q.npos)
	q.scq.give(n)
}

func benchPostOnly(b *testing.B, slots, slot int) {
	q, src, dst := postOnly(b, 2048)
	var wrs []rdma.WorkRequest
	base := dst.Remote().Addr
	if slots == 1 {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(src, 8, 88), Remote: rdma.RemoteAddr{Addr: base + 8, RKey: dst.RKey()}})
	} else {
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, Local: rdma.LocalSGE(src, 8, slots*slot-8), Remote: rdma.RemoteAddr{Addr: base + 8, RKey: dst.RKey()}})
	}
	stamps := slots * slot
	for j := 0; j < slots; j++ {
		f := rdma.SendFlags(0)
		if j%16 == 15 {
			f = rdma.FlagSignaled
		}
		wrs = append(wrs, rdma.WorkRequest{Op: rdma.OpWrite, Flags: f, Local: rdma.LocalSGE(src, stamps+8*j, 8), Remote: rdma.RemoteAddr{Addr: base + uint64(j*slot), RKey: dst.RKey()}})
	}
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu0 := threadCPU()
	for i := 0; i < b.N; i++ {
		n, err := q.PostSendBatch(wrs)
		if err != nil || n != len(wrs) {
			b.Fatal(n, err)
		}
		if i%16 == 15 {
			q.drained(16 * n)
		}
	}
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*slots), "cpu-ns/tick")
}

// BenchmarkPostOnly_Run64: a ring's 64-tick batch (one body WRITE of 64
// 128-byte slots, 64 stamps), the poster's work alone. 0 allocs/op.
func BenchmarkPostOnly_Run64(b *testing.B) { benchPostOnly(b, 64, 128) }

// BenchmarkPostOnly_Tick: one tick (body and stamp), the poster's work
// alone. 0 allocs/op.
func BenchmarkPostOnly_Tick(b *testing.B) { benchPostOnly(b, 1, 128) }

// threadCPU is the calling thread's CPU time in ns: on a loaded host the
// figure that wall time per op is not (time the thread was not running is
// left out).
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
