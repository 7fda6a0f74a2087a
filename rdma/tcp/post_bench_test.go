package tcp_test

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// BenchmarkPostSend_Write64 is the tcp hot path a publisher runs per tick:
// PostSend of a 64-byte WRITE (one in 16 signalled, as ring.Writer does)
// and the Poll that frees the send queue. It must report 0 allocs/op.
func BenchmarkPostSend_Write64(b *testing.B) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	bb := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	connect(b, a, bb)
	var cs [64]rdma.Completion
	var idle rdma.Yield
	wr := rdma.WorkRequest{Op: rdma.OpWrite}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := (i % 512) * 64
		wr.ID = uint64(i)
		wr.Local = rdma.LocalSGE(a.MR, slot, 64)
		wr.Remote = remote(bb.MR, slot)
		wr.Flags = 0
		if i%16 == 15 || i == b.N-1 {
			wr.Flags = rdma.FlagSignaled
		}
		for {
			err := a.QP.PostSend(&wr)
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				b.Fatal(err)
			}
			k := a.CQ.Poll(cs[:])
			for _, c := range cs[:k] {
				if c.Status != rdma.StatusSuccess {
					b.Fatalf("write completed %s", c.Status)
				}
			}
			idle.Idle(k)
		}
	}
	for done := false; !done; {
		k := a.CQ.Poll(cs[:])
		for _, c := range cs[:k] {
			done = done || c.ID == uint64(b.N-1)
		}
		idle.Idle(k)
	}
}

// BenchmarkPostSendBatch_Tick is a tick as ring.Writer posts it to a
// subscriber's ring over tcp: one chain of a 56-byte body WRITE and an
// 8-byte stamp WRITE (one stamp in 8 signalled), and the Poll that frees
// the send queue. It must report 0 allocs/op.
func BenchmarkPostSendBatch_Tick(b *testing.B) {
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	bb := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	connect(b, a, bb)
	bp := a.QP.(rdma.BatchPoster)
	var cs [64]rdma.Completion
	var idle rdma.Yield
	var wrs [2]rdma.WorkRequest
	wrs[0].Op, wrs[1].Op = rdma.OpWrite, rdma.OpWrite
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		slot := (i % 512) * 64
		wrs[0].Local, wrs[0].Remote = rdma.LocalSGE(a.MR, slot+8, 56), remote(bb.MR, slot+8)
		wrs[1].Local, wrs[1].Remote = rdma.LocalSGE(a.MR, slot, 8), remote(bb.MR, slot)
		wrs[1].ID, wrs[1].Flags = uint64(i), 0
		if i%8 == 7 || i == b.N-1 {
			wrs[1].Flags = rdma.FlagSignaled
		}
		for chain := wrs[:]; len(chain) > 0; {
			n, err := bp.PostSendBatch(chain)
			chain = chain[n:]
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				b.Fatal(err)
			}
			k := a.CQ.Poll(cs[:])
			for _, c := range cs[:k] {
				if c.Status != rdma.StatusSuccess {
					b.Fatalf("write completed %s", c.Status)
				}
			}
			idle.Idle(k)
		}
	}
	for done := false; !done; {
		k := a.CQ.Poll(cs[:])
		for _, c := range cs[:k] {
			done = done || c.ID == uint64(b.N-1)
		}
		idle.Idle(k)
	}
	reportCPU(b, cpu0, 1)
}

// BenchmarkPostSendBatch_Run64 is a batch of 64 ticks as ring.Writer posts
// it to a subscriber's ring over tcp: one WRITE of the 64 slots' bodies
// (128-byte slots), then the 64 stamps, one in 16 signalled, as one chain;
// and the Poll that frees the send queue. It must report 0 allocs/op.
func BenchmarkPostSendBatch_Run64(b *testing.B) {
	const slots, slot = 64, 128
	all := rdma.AccessLocalWrite | rdma.AccessRemote
	a := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	bb := newSide(b, openDevice(b, tcp.Config{}), 2048, all)
	connect(b, a, bb)
	bp := a.QP.(rdma.BatchPoster)
	var cs [64]rdma.Completion
	var idle rdma.Yield
	var wrs [slots + 1]rdma.WorkRequest
	for i := range wrs {
		wrs[i].Op = rdma.OpWrite
	}
	stamps := slots * slot // local stamp sources, after the images
	posts := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		base := (i % 4) * slots * slot
		wrs[0].Local, wrs[0].Remote = rdma.LocalSGE(a.MR, 8, slots*slot-8), remote(bb.MR, base+8)
		for j := 1; j <= slots; j++ {
			w := &wrs[j]
			w.Local, w.Remote = rdma.LocalSGE(a.MR, stamps+8*(j-1), 8), remote(bb.MR, base+(j-1)*slot)
			w.ID, w.Flags = uint64(i), 0
			if posts++; posts%16 == 0 || (i == b.N-1 && j == slots) {
				w.Flags = rdma.FlagSignaled
			}
		}
		for chain := wrs[:]; len(chain) > 0; {
			n, err := bp.PostSendBatch(chain)
			chain = chain[n:]
			if err == nil {
				break
			}
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				b.Fatal(err)
			}
			k := a.CQ.Poll(cs[:])
			for _, c := range cs[:k] {
				if c.Status != rdma.StatusSuccess {
					b.Fatalf("write completed %s", c.Status)
				}
			}
			idle.Idle(k)
		}
	}
	for done := false; !done; {
		k := a.CQ.Poll(cs[:])
		for _, c := range cs[:k] {
			done = done || c.ID == uint64(b.N-1) && c.Status == rdma.StatusSuccess
		}
		idle.Idle(k)
	}
	b.ReportMetric(float64(b.N*slots)/b.Elapsed().Seconds(), "ticks/s")
	reportCPU(b, cpu0, slots)
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per tick since cpu0, both ends
// of the pair and every goroutine included: on a loaded host the figure
// that wall time per op is not.
func reportCPU(b *testing.B, cpu0 time.Duration, ticksPerOp int) {
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*ticksPerOp), "cpu-ns/tick")
}
