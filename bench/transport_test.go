package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// floorPair maps one floor region twice, as two processes would.
func floorPair(t testing.TB, size int) (*floorTx, *floorRx) {
	t.Helper()
	m, err := shmem.Alloc("bench-test", floorRegionSize(size, DefaultRingSlots))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	bt, err := shmem.Map(m.Fd(), floorRegionSize(size, DefaultRingSlots))
	require.NoError(t, err)
	br, err := shmem.Map(m.Fd(), floorRegionSize(size, DefaultRingSlots))
	require.NoError(t, err)
	tx, rx := newFloorTx(bt, size, DefaultRingSlots, rdma.Yield{}), newFloorRx(br, size, DefaultRingSlots, rdma.Yield{})
	t.Cleanup(func() {
		assert.NoError(t, tx.close())
		assert.NoError(t, rx.close())
		assert.NoError(t, tx.close(), "close is idempotent")
	})
	return tx, rx
}

func chanPair(size, batch int) (*chanTx, *chanRx) {
	p := newChanPipe(size, batch, DefaultRingSlots)
	return &chanTx{p: p, filler: make([]byte, size-MinSize), codec: newCodec(), idle: rdma.Yield{}},
		&chanRx{p: p, scratch: make([]byte, size), codec: newCodec(), idle: rdma.Yield{}}
}

// flood sends n ticks (in batches) from one goroutine while subLoop
// receives them in this one, and checks every tick arrived once, in order.
func checkFlood(t *testing.T, tx txPort, rx rxPort, batch int) {
	t.Helper()
	deadline := nanotime() + int64(20*time.Second)
	const n = 3*DefaultRingSlots + 7 // wraps the rings several times
	errc := make(chan error, 1)
	go func() {
		var seq int64
		for seq < n {
			k := min(batch, n-int(seq))
			var err error
			if k > 1 {
				err = tx.sendBatch(seq, k, 123, deadline)
			} else {
				err = tx.send(seq, 123, deadline)
			}
			if err != nil {
				errc <- err
				return
			}
			seq += int64(k)
		}
		errc <- tx.send(seq, endMark, deadline)
	}()
	st, err := subLoop(rx, nil, false, 1, deadline)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	assert.Equal(t, int64(n), st.count)
	assert.Zero(t, st.lost)
	assert.Equal(t, int64(123), st.startNs)
}

func TestFloor_Flood_DeliversEveryTickInOrderAcrossWraps(t *testing.T) {
	for _, batch := range []int{1, 64, DefaultRingSlots} {
		tx, rx := floorPair(t, 64)
		checkFlood(t, tx, rx, batch)
	}
}

func TestFloor_LargeMessages_DeliversEveryTick(t *testing.T) {
	tx, rx := floorPair(t, 200)
	checkFlood(t, tx, rx, 8)
}

func TestChan_Flood_DeliversEveryTickInOrder(t *testing.T) {
	for _, batch := range []int{1, 64} {
		tx, rx := chanPair(64, batch)
		checkFlood(t, tx, rx, batch)
	}
}

func TestFloor_Next_TimesOutWhenNothingArrives(t *testing.T) {
	_, rx := floorPair(t, 64)
	_, _, err := rx.next(nanotime() + int64(20*time.Millisecond))
	assert.ErrorIs(t, err, ErrDeadline)
}

func TestFloor_Send_TimesOutWhenSubscriberStalls(t *testing.T) {
	tx, _ := floorPair(t, 64)
	deadline := nanotime() + int64(50*time.Millisecond)
	var err error
	for i := 0; i <= DefaultRingSlots && err == nil; i++ {
		err = tx.send(int64(i), 1, deadline)
	}
	assert.ErrorIs(t, err, ErrDeadline, "a full ring without a reader must not spin forever")
}

func TestFloor_Next_RejectsACorruptTick(t *testing.T) {
	tx, rx := floorPair(t, 64)
	require.NoError(t, tx.send(0, 5, nanotime()+int64(time.Second)))
	tx.b[floorHeader+offTick] = 99 // the tick's version byte
	_, _, err := rx.next(nanotime() + int64(time.Second))
	assert.Error(t, err)
}

func TestSubLoop_CountsSkippedSequencesAsLost(t *testing.T) {
	tx, rx := chanPair(64, 1)
	deadline := nanotime() + int64(5*time.Second)
	for _, seq := range []int64{0, 1, 5, 6} {
		require.NoError(t, tx.send(seq, 1, deadline))
	}
	require.NoError(t, tx.send(7, endMark, deadline))
	st, err := subLoop(rx, nil, true, 1, deadline)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.count)
	assert.Equal(t, int64(3), st.lost)
	assert.Equal(t, int64(4), st.hist.TotalCount())
}

func TestPacedLoop_PingPong_RecordsEveryRoundTrip(t *testing.T) {
	atx, arx := chanPair(64, 1)
	btx, brx := chanPair(64, 1)
	sched := newSchedule(nanotime()+int64(time.Millisecond), 1000, 50*time.Millisecond)
	errc := make(chan error, 1)
	go func() {
		_, err := subLoop(arx, btx, false, 1, sched.deadline)
		errc <- err
	}()
	st, err := pacedLoop(atx, brx, rdma.Yield{}, sched)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	assert.Equal(t, int64(50), st.sent)
	require.NotNil(t, st.hist)
	assert.Equal(t, int64(50), st.hist.TotalCount())
}

func TestPacedLoop_LateSendsCountFromTheIntendedTime(t *testing.T) {
	tx, rx := chanPair(64, 1)
	// Start 30 ms in the past: the first sends are late by up to 30 ms
	// and the subscriber must see that, not the time of the actual send.
	sched := newSchedule(nanotime()-int64(30*time.Millisecond), 1000, 40*time.Millisecond)
	errc := make(chan error, 1)
	go func() {
		_, err := pacedLoop(tx, nil, rdma.Yield{}, sched)
		errc <- err
	}()
	st, err := subLoop(rx, nil, true, 1, sched.deadline)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	assert.Equal(t, int64(40), st.count)
	assert.GreaterOrEqual(t, st.hist.Max(), int64(25*time.Millisecond))
}

func TestHotPath_SendAndNext_DoNotAllocate(t *testing.T) {
	ftx, frx := floorPair(t, 64)
	ctx, crx := chanPair(64, 1)
	deadline := nanotime() + int64(10*time.Second)
	h := newHist()
	for name, p := range map[string]struct {
		tx txPort
		rx rxPort
	}{"floor": {ftx, frx}, "chan": {ctx, crx}} {
		var i int64
		allocs := testing.AllocsPerRun(1000, func() {
			if err := p.tx.send(i, nanotime(), deadline); err != nil {
				panic(err)
			}
			_, ts, err := p.rx.next(deadline)
			if err != nil {
				panic(err)
			}
			record(h, nanotime()-ts)
			i++
		})
		assert.Zero(t, allocs, name)
	}
}

func TestRecord_ClampsIntoTheHistogramRange(t *testing.T) {
	h := newHist()
	record(h, -5)
	record(h, 0)
	record(h, 20*histMax)
	assert.Equal(t, int64(3), h.TotalCount())
	assert.Equal(t, h.ValueAtQuantile(0), h.ValueAtQuantile(50))
	assert.True(t, h.ValuesAreEquivalent(h.Max(), histMax))
}

func TestPacedLoop_FallingBehindPastStop_RecordsUnsentTicksAsLowerBounds(t *testing.T) {
	tx, rx := chanPair(64, 1)
	// The schedule's stop is already 20 ms past: nothing is sent, every
	// tick is recorded at (stop - intended) or more, none is dropped.
	sched := schedule{period: int64(time.Millisecond)}
	sched.start = nanotime() - int64(100*time.Millisecond)
	sched.end = sched.start + int64(50*time.Millisecond)
	sched.stop = sched.end + int64(30*time.Millisecond)
	sched.deadline = nanotime() + int64(10*time.Second)
	errc := make(chan error, 1)
	go func() {
		_, err := subLoop(rx, nil, true, 1, sched.deadline)
		errc <- err
	}()
	st, err := pacedLoop(tx, nil, rdma.Yield{}, sched)
	require.NoError(t, err)
	require.NoError(t, <-errc)
	assert.Zero(t, st.sent)
	assert.Equal(t, int64(50), st.unsent)
	assert.Equal(t, int64(50), st.hist.TotalCount())
	assert.GreaterOrEqual(t, st.hist.Min(), int64(30*time.Millisecond)*999/1000)
}

func TestSubLoop_WaitsForEveryPublishersEndMark(t *testing.T) {
	tx, rx := chanPair(64, 1)
	deadline := nanotime() + int64(5*time.Second)
	// Two publishers sharing one sequence: 0 and 1 from one, the first end
	// mark at 2, 3 from the other, its end mark at 4.
	for _, m := range [][2]int64{{0, 1}, {1, 1}, {2, endMark}, {3, 1}, {4, endMark}} {
		require.NoError(t, tx.send(m[0], m[1], deadline))
	}
	st, err := subLoop(rx, nil, false, 2, deadline)
	require.NoError(t, err)
	assert.Equal(t, int64(3), st.count, "the tick after the first end mark is delivered")
	assert.Zero(t, st.lost, "end marks take sequences; they are not losses")
}
