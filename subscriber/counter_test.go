package subscriber

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// eventTicks counts ticks and keeps events.
type eventTicks struct {
	mu     sync.Mutex
	n      int
	events []ring.Event
}

func (h *eventTicks) OnTicks(t []ring.Tick) { h.mu.Lock(); h.n += len(t); h.mu.Unlock() }
func (h *eventTicks) OnEvent(ev ring.Event) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
}
func (h *eventTicks) got() (int, []ring.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, append([]ring.Event(nil), h.events...)
}

// A subscriber whose home was killed asks the nodes it knows for the
// topic's counter (learnTail), and the one that answers may be the next
// epoch's home, heard before its record reached this node: its counter is
// its epoch's start. What the ring misses below that start is the ended
// epoch's unused range, one ring.EventEpoch, not a gap of ~4 M sequences
// (the chaos test's reliable subscriber named 25284385..29360128 a gap in
// CI, more than were ever claimed). The home's answer carries its epoch's
// start, and the reader learns it before the bound. Here the real home
// answers first (its counter and its start, 1), then a stand-in for the
// next epoch's home answers with the start the next epoch would take:
// this epoch's reservation.
func TestTail_CounterOfAHomeHeardBeforeItsRecord_NamesTheEndedEpochsRest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := testlog.OnFailure(t)
	node, err := bus.Open(ctx, bus.Config{NodeID: "tail-start", LeaseTTL: 10 * time.Second, Logger: log})
	require.NoError(t, err)
	defer node.Close()
	devs := link.NewDevices(link.DevicesConfig{HostID: node.HostID()})
	defer devs.Close()
	var h eventTicks
	sub, err := New(ctx, node, devs, Config{Topic: "tail-start", Slots: 1024, StatsInterval: -1, GapTimeout: 10 * time.Millisecond, Logger: *log}, &h)
	require.NoError(t, err)
	defer sub.Close()
	pub, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "tail-start", Idle: rdma.Yield{}, JournalSlots: -1, Timeout: 10 * time.Second, Logger: *log})
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.WaitSubscribers(ctx, 1))
	payload := make([]byte, tick.Size)
	for range 100 {
		_, err := pub.Publish(tick.MessageType, payload, time.Now().UnixNano())
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { sub.Poll(); n, _ := h.got(); return n == 100 }, 10*time.Second, time.Millisecond)
	hi := sub.home.Load()
	require.NotNil(t, hi)
	require.Greater(t, hi.Reserved, uint64(101), "the epoch's reservation")

	hc, err := sub.askCounter(ctx, hi.Node)
	require.NoError(t, err)
	assert.Equal(t, homeCounter{Next: 101, Start: hi.Start}, hc, "the home tells its counter and its epoch's start")

	next := homeCounter{Next: hi.Reserved, Start: hi.Reserved} // the next epoch's home, nothing claimed yet
	defer setAskHook(func(*Subscriber, context.Context, bus.PeerInfo) (homeCounter, error) { return next, nil })()
	sub.learnCounter(bus.PeerInfo{}, "in the test")
	require.Eventually(t, func() bool { sub.Poll(); _, evs := h.got(); return len(evs) > 0 }, 10*time.Second, time.Millisecond, "nothing named")
	for range 100 {
		sub.Poll()
	}
	_, evs := h.got()
	assert.Equal(t, []ring.Event{{Kind: ring.EventEpoch, From: 101, To: hi.Reserved - 1}}, evs, "the ended epoch's rest, no loss")
	assert.Zero(t, sub.Counters().Lost())
}

// FuzzDecodeCounter: a home's counter reply crossed a process; whatever
// its bytes, decodeCounter errs or gives a counter that is not 0 with a
// start at or below it, and a 16-byte reply it takes round-trips.
func FuzzDecodeCounter(f *testing.F) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], 101)
	binary.LittleEndian.PutUint64(b[8:], 1)
	f.Add(b[:])
	f.Add(b[:8])
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Add(make([]byte, 24))
	binary.LittleEndian.PutUint64(b[:8], ring.FenceAdd+101)
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, data []byte) {
		hc, err := decodeCounter(data)
		if err != nil {
			assert.Equal(t, homeCounter{}, hc)
			return
		}
		require.Contains(t, []int{8, 16}, len(data))
		require.NotZero(t, hc.Next)
		require.Less(t, hc.Next, uint64(ring.FenceAdd), "a fenced home's counter is no sequence")
		require.LessOrEqual(t, hc.Start, hc.Next)
		if len(data) == 16 {
			var back [16]byte
			binary.LittleEndian.PutUint64(back[:8], hc.Next)
			binary.LittleEndian.PutUint64(back[8:], hc.Start)
			require.Equal(t, data, back[:])
		}
	})
}

// A fenced home (its epoch superseded) answers with its counter plus
// ring.FenceAdd: that is refused as errFencedHome, so no path (learn,
// unstick, the tail) moves the ring there; the next node is asked.
func TestDecodeCounter_AFencedHomesCounterIsRefused(t *testing.T) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], ring.FenceAdd+4194305)
	binary.LittleEndian.PutUint64(b[8:], 4194305)
	_, err := decodeCounter(b[:])
	require.ErrorIs(t, err, errFencedHome)
	binary.LittleEndian.PutUint64(b[:8], ring.FenceAdd-1)
	hc, err := decodeCounter(b[:])
	require.NoError(t, err)
	assert.Equal(t, homeCounter{Next: ring.FenceAdd - 1, Start: 4194305}, hc)
}
