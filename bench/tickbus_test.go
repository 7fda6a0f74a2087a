package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/ring"
)

// loopTopo is one topic in one process through the public API: a Client
// with the embedded NATS server, and the tickbus case's ports on a second
// Client of this process, as a child would open them.
type loopTopo struct {
	tx *tbTx
	rx *tbRx
}

func newLoopTopo(t testing.TB, mode ring.Mode) loopTopo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := tickbus.Connect(ctx, tickbus.WithLeaseTTL(tbLease))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	a := roleArgs{transport: CaseTickbusShm, url: srv.URL(), size: 64, batch: 64, idle: "yield", ringMode: "lossy", slots: DefaultRingSlots, claim: "cas",
		peers: 1, duration: time.Second}
	if mode == ring.Reliable {
		a.ringMode = "reliable"
	}
	rx, err := openTBRx(a, 0)
	require.NoError(t, err)
	tx, err := openTBTx(a, 0)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, tx.close())
		assert.NoError(t, rx.close())
	})
	return loopTopo{tx: tx.(*tbTx), rx: rx.(*tbRx)}
}

func TestTickbusPorts_DeliverEveryTickInOrder(t *testing.T) {
	for _, mode := range []ring.Mode{ring.Reliable, ring.Lossy} {
		t.Run(mode.String(), func(t *testing.T) { testPortsInOrder(t, mode) })
	}
}

func testPortsInOrder(t *testing.T, mode ring.Mode) {
	tp := newLoopTopo(t, mode)
	deadline := nanotime() + int64(10*time.Second)
	for i := int64(0); i < 100; i++ {
		require.NoError(t, tp.tx.send(i, 1000+i, deadline))
	}
	require.NoError(t, tp.tx.sendBatch(100, 16, 7, deadline))
	for i := int64(0); i < 116; i++ {
		seq, ts, err := tp.rx.next(deadline)
		require.NoError(t, err)
		assert.Equal(t, i+1, seq, "the topic's sequence, from 1")
		if i < 100 {
			assert.Equal(t, 1000+i, ts)
		} else {
			assert.Equal(t, int64(7), ts)
		}
	}
	_, _, err := tp.rx.next(nanotime() + int64(20*time.Millisecond))
	assert.ErrorIs(t, err, ErrDeadline)
	require.NoError(t, tp.tx.check())
}

// A publisher is ready (its run may start) only once each subscriber has
// attached what it attaches after its ring is connected: the journal and,
// reliable, its credit cell. Those attaches otherwise land in the run's
// first 100 ms and are timed as ticks' latency.
func TestTickbusPorts_PublisherReady_OnceTheSubscriberHasSettled(t *testing.T) {
	for _, mode := range []ring.Mode{ring.Reliable, ring.Lossy} {
		t.Run(mode.String(), func(t *testing.T) {
			tp := newLoopTopo(t, mode)
			c := tp.rx.s.Counters()
			assert.NotZero(t, c.JournalEpoch, "journal attached")
			if mode == ring.Reliable {
				assert.Equal(t, 1, c.Credits, "credit cell attached")
			}
		})
	}
}

func TestTickbusPorts_Stopped_EndsOnceQuiet(t *testing.T) {
	tp := newLoopTopo(t, ring.Lossy)
	tp.rx.stopWhenQuiet()
	_, _, err := tp.rx.next(nanotime() + int64(10*time.Second))
	assert.ErrorIs(t, err, errStopped)
}

func TestTickbusPorts_HotPath_DoesNotAllocate(t *testing.T) {
	tp := newLoopTopo(t, ring.Reliable)
	deadline := nanotime() + int64(30*time.Second)
	h := newHist()
	var i int64
	allocs := testing.AllocsPerRun(1000, func() {
		if err := tp.tx.send(i, nanotime(), deadline); err != nil {
			panic(err)
		}
		_, ts, err := tp.rx.next(deadline)
		if err != nil {
			panic(err)
		}
		record(h, nanotime()-ts)
		i++
	})
	assert.Zero(t, allocs)
}
