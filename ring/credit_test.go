package ring

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm/shmtest"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// creditQP is a reliable subscriber's credit queue pair as the product
// makes it: the reader's QP on one side, and on the writer's side a
// confined QP granted the target's cell only (GrantCredit) before it
// connects. It returns the reader's QP and the CreditDesc the grant gave.
func creditQP(t *testing.T, dev rdma.Device, w *Writer, cd CreditDesc, readerCQ rdma.CompletionQueue) (rdma.QueuePair, CreditDesc) {
	t.Helper()
	wcq := newCQ(t, dev, 64)
	wq, err := dev.CreateQP(rdma.QPConfig{SendCQ: wcq, RecvCQ: wcq, SendDepth: 16, RecvDepth: 1, Confined: true})
	require.NoError(t, err)
	granted, err := w.GrantCredit(wq, dev, cd)
	require.NoError(t, err)
	rq, err := dev.CreateQP(rdma.QPConfig{SendCQ: readerCQ, RecvCQ: readerCQ, SendDepth: 64, RecvDepth: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- wq.Connect(ctx, rq.LocalEndpoint()) }()
	require.NoError(t, rq.Connect(ctx, wq.LocalEndpoint()))
	require.NoError(t, <-errc)
	return rq, granted
}

// Two reliable subscribers of one writer: each one's credit QP writes its
// own cell (the writer learns its position without a READ), and cannot
// write the other's cell, nor any other byte of the writer's memory: the
// write fails, the other cell is untouched, the QP goes to ERR. Run on shm
// and on tcp (both confine queue pairs).
func TestWriter_GrantCredit_EachCreditQPReachesItsOwnCellOnly(t *testing.T) {
	for _, prov := range []string{rdma.ProviderShm, rdma.ProviderTCP} {
		t.Run(prov, func(t *testing.T) {
			var dev rdma.Device = openDev(t)
			if prov == rdma.ProviderTCP {
				d, err := tcp.Open(tcp.Config{HostID: "test-host"})
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Close() })
				dev = d
			}
			tp := newTopoOn(t, dev, HomeConfig{}, WriterConfig{})
			rcq := newCQ(t, dev, 256)
			rc := RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1, CQ: rcq}
			var rings [2]*Ring
			var cds [2]CreditDesc
			for i := range rings {
				r, err := NewRing(dev, rc)
				require.NoError(t, err)
				t.Cleanup(func() { _ = r.Close() })
				rings[i] = r
				wq, _ := qpPair(t, dev, tp.wcq, dev, newCQ(t, dev, 64))
				cds[i], err = tp.w.AddTarget(Target{ID: uint64(i), QP: wq, Ring: r.Desc()})
				require.NoError(t, err)
			}
			cells := map[uint64]*creditCell{}
			for _, tg := range tp.w.targets.Load().all {
				cells[tg.id] = tg.cell
			}
			require.Len(t, cells, 2)

			// Subscriber 0 attaches its cell and reads: the writer sees
			// its position.
			rq, granted := creditQP(t, dev, tp.w, cds[0], rcq)
			assert.Equal(t, uint64(8), granted.Cell.Len)
			rd := rings[0].Reader()
			require.NoError(t, rd.AddCredit(rq, granted))
			for i := uint64(1); i <= 5; i++ {
				_, err := tp.w.Publish(0, payloadFor(i, 8), 0)
				require.NoError(t, err)
			}
			var c collector
			pollUntil(t, rd, &c, func() bool { return len(c.ticks) == 5 })
			require.Eventually(t, func() bool { rd.sendCredits(true); rd.reap(); return cells[0].Next.Load() == 6 },
				10*time.Second, time.Millisecond, "subscriber 0's position in its own cell")
			assert.Zero(t, rd.Stats().CreditErrors)

			// Its credit QP names subscriber 1's cell (same region, same
			// rkey, the next line): refused, the cell untouched.
			before := cells[1].Next.Load()
			local, err := dev.RegisterMemory(4096, rdma.AccessLocalWrite)
			require.NoError(t, err)
			t.Cleanup(func() { _ = local.Close() })
			for i := range local.Bytes()[:8] {
				local.Bytes()[i] = 0x7f
			}
			wr := rdma.WorkRequest{ID: 77, Op: rdma.OpWrite, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, 0, 8),
				Remote: rdma.RemoteAddr{Addr: cds[1].Cell.Addr, RKey: granted.Cell.RKey}}
			cq2 := newCQ(t, dev, 64)
			rq2, _ := creditQP(t, dev, tp.w, cds[0], cq2)
			require.NoError(t, rq2.PostSend(&wr))
			var comp [1]rdma.Completion
			require.Eventually(t, func() bool { return cq2.Poll(comp[:]) == 1 }, 10*time.Second, time.Millisecond)
			require.Equal(t, uint64(77), comp[0].ID)
			assert.Equal(t, rdma.StatusRemoteAccess, comp[0].Status, "a credit QP writing another subscriber's cell")
			assert.Equal(t, before, cells[1].Next.Load(), "the other subscriber's cell changed")
			require.Eventually(t, func() bool { return rq2.State() == rdma.QPError }, 10*time.Second, time.Millisecond)
		})
	}
}

// On shm a subscriber's credit QP peer that ignores its grant (keeps and
// maps every memfd it is sent) holds its own cell's page and nothing else
// of the writer's memory: not another subscriber's cell.
func TestWriter_GrantCredit_ShmPeerHoldsItsOwnCellPageOnly(t *testing.T) {
	dev := openDev(t)
	tp := newTopoOn(t, dev, HomeConfig{}, WriterConfig{})
	rc := RingConfig{Slots: 64, Mode: Reliable, GapTimeout: -1, CQ: newCQ(t, dev, 64)}
	var cds [3]CreditDesc
	for i := range cds {
		r, err := NewRing(dev, rc)
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		wq, _ := qpPair(t, dev, tp.wcq, dev, newCQ(t, dev, 64))
		cds[i], err = tp.w.AddTarget(Target{ID: uint64(i), QP: wq, Ring: r.Desc()})
		require.NoError(t, err)
	}
	marks := map[uint64]uint64{}
	for _, tg := range tp.w.targets.Load().all {
		marks[tg.id] = 0x5a5a000000000000 | tg.id<<8 | 0x77
		tg.cell.Next.Store(marks[tg.id])
	}
	wcq := newCQ(t, dev, 8)
	wq, err := dev.CreateQP(rdma.QPConfig{SendCQ: wcq, RecvCQ: wcq, SendDepth: 4, RecvDepth: 1, Confined: true})
	require.NoError(t, err)
	_, err = tp.w.GrantCredit(wq, dev, cds[1])
	require.NoError(t, err)
	held, err := shmtest.Hostile(wq)
	require.NoError(t, err)
	total, own := 0, false
	for _, h := range held {
		t.Cleanup(h.Close)
		total += len(h.Mem)
		for o := 0; o+8 <= len(h.Mem); o += 8 {
			v := binary.LittleEndian.Uint64(h.Mem[o:])
			own = own || v == marks[1]
			assert.NotEqual(t, marks[0], v, "the peer holds subscriber 0's cell")
			assert.NotEqual(t, marks[2], v, "the peer holds subscriber 2's cell")
		}
	}
	assert.True(t, own, "the peer holds its own cell")
	assert.Equal(t, creditStride, total, "the peer holds one page: its own cell's")
}
