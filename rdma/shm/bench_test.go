package shm_test

import (
	"context"
	"testing"
	"time"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

// benchPair is a QP on one device connected to a QP on another, with a
// local buffer and a target region.
func benchPair(b testing.TB) (rdma.QueuePair, rdma.CompletionQueue, rdma.MemoryRegion, rdma.MemoryRegion) {
	b.Helper()
	open := func() rdma.Device {
		d, err := shm.Open(shm.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = d.Close() })
		return d
	}
	da, db := open(), open()
	mk := func(d rdma.Device) (rdma.QueuePair, rdma.CompletionQueue) {
		cq, err := d.CreateCQ(1024)
		if err != nil {
			b.Fatal(err)
		}
		qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 256, RecvDepth: 1})
		if err != nil {
			b.Fatal(err)
		}
		return qp, cq
	}
	qa, cqa := mk(da)
	qb, _ := mk(db)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := qa.Connect(ctx, qb.LocalEndpoint()); err != nil {
		b.Fatal(err)
	}
	if err := qb.Connect(ctx, qa.LocalEndpoint()); err != nil {
		b.Fatal(err)
	}
	local, err := da.RegisterMemory(4096, rdma.AccessLocalWrite)
	if err != nil {
		b.Fatal(err)
	}
	target, err := db.RegisterMemory(1<<16, rdma.AccessRemote)
	if err != nil {
		b.Fatal(err)
	}
	return qa, cqa, local, target
}

// BenchmarkPostSendPoll posts one signalled request and polls its
// completion per iteration: the full cost of a one-sided op through shm.
func BenchmarkPostSendPoll(b *testing.B) {
	cases := []struct {
		name string
		wr   func(local, target rdma.MemoryRegion) rdma.WorkRequest
	}{
		{"WRITE-64B-inline", func(_, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: make([]byte, 64), Remote: rdma.RemoteAddr{Addr: t.Addr() + 128, RKey: t.RKey()}}
		}},
		{"WRITE-64B-SGE", func(l, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(l, 0, 64), Remote: rdma.RemoteAddr{Addr: t.Addr() + 128, RKey: t.RKey()}}
		}},
		{"WRITE-8B-stamp", func(_, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: make([]byte, 8), Remote: rdma.RemoteAddr{Addr: t.Addr(), RKey: t.RKey()}}
		}},
		{"READ-64B", func(l, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpRead, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(l, 0, 64), Remote: rdma.RemoteAddr{Addr: t.Addr() + 128, RKey: t.RKey()}}
		}},
		{"CAS", func(l, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpCompareAndSwap, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(l, 0, 8), Remote: rdma.RemoteAddr{Addr: t.Addr() + 256, RKey: t.RKey()}}
		}},
		{"FAA", func(l, t rdma.MemoryRegion) rdma.WorkRequest {
			return rdma.WorkRequest{Op: rdma.OpFetchAndAdd, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(l, 0, 8), Remote: rdma.RemoteAddr{Addr: t.Addr() + 256, RKey: t.RKey()}, Add: 1}
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			qp, cq, local, target := benchPair(b)
			wr := tc.wr(local, target)
			buf := make([]rdma.Completion, 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := qp.PostSend(&wr); err != nil {
					b.Fatal(err)
				}
				if cq.Poll(buf) != 1 || buf[0].Status != rdma.StatusSuccess {
					b.Fatalf("completion %+v", buf[0])
				}
			}
		})
	}
}

// BenchmarkWriteUnsignaled is the ring's publishing pattern: 64-byte
// inline WRITEs, every 16th signalled and reaped by polling.
func BenchmarkWriteUnsignaled(b *testing.B) {
	qp, cq, _, target := benchPair(b)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Inline: make([]byte, 64), Remote: rdma.RemoteAddr{Addr: target.Addr() + 128, RKey: target.RKey()}}
	buf := make([]rdma.Completion, 16)
	b.ReportAllocs()
	b.SetBytes(64)
	i := 0
	for b.Loop() {
		i++
		wr.Flags = rdma.FlagInline
		if i%16 == 0 {
			wr.Flags |= rdma.FlagSignaled
		}
		if err := qp.PostSend(&wr); err != nil {
			b.Fatal(err)
		}
		if i%16 == 0 {
			cq.Poll(buf)
		}
	}
}
