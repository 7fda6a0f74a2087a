package ring

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm/shmtest"
)

// On shm the peer of a queue pair granted the home's counter word (the
// fence grant, publisher/home.go) that ignores its grant (keeps and maps
// every memfd it is sent) holds the counter's unit (header, counter, solo
// word) and not the journal.
func TestHome_CounterGrant_ShmPeerHoldsTheCounterUnitOnly(t *testing.T) {
	dev := openDev(t)
	h, err := NewHome(dev, HomeConfig{JournalSlots: 64, SlotSize: 128, Start: 0x77aa0001})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	const mark = 0x5a5a5a5a5a5a5a5a
	jr := h.Region().Bytes()[offJournal:]
	for o := 0; o+8 <= len(jr); o += 8 {
		binary.LittleEndian.PutUint64(jr[o:], mark)
	}
	cq := newCQ(t, dev, 8)
	qp, err := dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 1, Confined: true})
	require.NoError(t, err)
	d := h.Desc()
	_, err = qp.GrantRange(h.Region(), int(d.CounterAddr()-d.Region.Addr), 8, rdma.AccessRemoteAtomic)
	require.NoError(t, err)
	held, err := shmtest.Hostile(qp)
	require.NoError(t, err)
	for _, hd := range held {
		t.Cleanup(hd.Close)
	}
	total, counter := 0, false
	for _, hd := range held {
		total += len(hd.Mem)
		for o := 0; o+8 <= len(hd.Mem); o += 8 {
			v := binary.LittleEndian.Uint64(hd.Mem[o:])
			counter = counter || (o == offHot && v == 0x77aa0001)
			if v == mark {
				assert.Fail(t, "the peer holds the journal", "a word of the journal at %d of a held file", o)
				return
			}
		}
	}
	assert.True(t, counter, "the peer holds the counter's unit")
	assert.Equal(t, HomeJournalOffset, total, "the peer holds the counter's unit, nothing more")
}
