package tickbus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
)

// stamps collects each delivered message's sequence and publish time.
type stamps struct {
	mu  sync.Mutex
	seq []uint64
	ns  []int64
}

func (s *stamps) OnMessages(ms []tickbus.Message) {
	s.mu.Lock()
	for _, m := range ms {
		s.seq = append(s.seq, m.Seq)
		s.ns = append(s.ns, m.PublishNs)
	}
	s.mu.Unlock()
}

func (s *stamps) OnEvent(tickbus.Event) {}

func (s *stamps) snapshot() ([]uint64, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.seq...), append([]int64(nil), s.ns...)
}

// warmUp publishes through publish until the subscription has its first
// tick: ticks claimed before the publisher reached the ring are never
// this ring's (counted as BeforeJoin), so a test of what arrives starts
// after that.
func warmUp(t *testing.T, h *stamps, publish func() error) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool { // on a goroutine of testify's: no require inside
		if err = publish(); err != nil {
			return true
		}
		seq, _ := h.snapshot()
		return len(seq) > 0
	}, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
}

func TestClient_Publish_OnePublisherPerTopicSafeFromAnyGoroutine(t *testing.T) {
	c := connect(t)
	var h stamps
	s, err := c.Subscribe("cp", &h, tickbus.WithRing(4096, 128), tickbus.Reliable())
	require.NoError(t, err)
	warmUp(t, &h, func() error {
		return c.Publish("cp", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1})
	})
	seq, _ := h.snapshot()
	first := seq[0]

	const goroutines, each = 3, 200
	errc := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			for i := range each {
				if err := c.Publish("cp", &tickbus.Tick{Instrument: uint64(g*each + i + 1), Kind: tickbus.Ask, Price: 2, Size: 1}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range goroutines {
		require.NoError(t, <-errc)
	}
	require.NoError(t, c.Publish("cp", &tickbus.Tick{Instrument: 9, Kind: tickbus.Bid, Price: 1, Size: 1}))
	require.Eventually(t, func() bool {
		seq, _ := h.snapshot()
		return len(seq) > 0 && seq[len(seq)-1] >= first+goroutines*each+1
	}, 20*time.Second, 5*time.Millisecond)
	seq, _ = h.snapshot()
	for i, q := range seq {
		require.Equal(t, first+uint64(i), q, "every sequence once, in order")
	}
	assert.Equal(t, 1, s.Publishers(), "one publisher for the topic, however many goroutines publish")
	assert.Zero(t, s.Counters().Lost())

	tk := tickbus.Tick{Instrument: 3, Kind: tickbus.Trade, Price: 4, Size: 5}
	allocs := testing.AllocsPerRun(500, func() {
		tk.PubTime = 0
		if err := c.Publish("cp", &tk); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "Client.Publish after the topic's first")
}

func TestClient_Publish_BadTopicOrTickOrClosedClient_ClearErrorNothingKept(t *testing.T) {
	c := connect(t)
	for range 2 { // the failed making is not kept: the second call tries again and fails the same way
		err := c.Publish("no spaces allowed", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1})
		assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	}
	err := c.Publish("ok", &tickbus.Tick{Kind: tickbus.Bid, Price: 1, Size: 1})
	assert.ErrorIs(t, err, tickbus.ErrInvalidTick, "instrument 0")
	require.NoError(t, c.Close())
	assert.ErrorIs(t, c.Publish("ok", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1}), tickbus.ErrClosed)
	assert.ErrorIs(t, c.Publish("new", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1}), tickbus.ErrClosed)
}

// WithRate stamps each message with its turn's intended time, one
// interval after the last one's, whenever it is really sent: that is what
// keeps coordinated omission out of the latency. The stamps are checked,
// never the clock.
func TestWithRate_StampsEachMessageWithItsIntendedTime(t *testing.T) {
	c := connect(t, tickbus.WithPublisherDefaults(tickbus.WithRate(1000)))
	var hDefault, hOwn stamps
	_, err := c.Subscribe("paced", &hDefault)
	require.NoError(t, err)
	_, err = c.Subscribe("paced2", &hOwn)
	require.NoError(t, err)
	own, err := c.Publisher("paced2", tickbus.WithRate(2000)) // the publisher's own option wins
	require.NoError(t, err)
	defer own.Close()

	warmUp(t, &hDefault, func() error {
		return c.Publish("paced", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1})
	})
	warmUp(t, &hOwn, func() error { _, err := own.Publish(2, []byte("x")); return err })
	// Behind the schedule: the first sends of the loop go at once, each
	// still stamped with its turn's time, so a stamp of the send's clock
	// would show here as microseconds apart.
	time.Sleep(10 * time.Millisecond)
	for range 20 {
		require.NoError(t, c.Publish("paced", &tickbus.Tick{Instrument: 1, Kind: tickbus.Bid, Price: 1, Size: 1}))
		_, err := own.Publish(2, []byte("x"))
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		h        *stamps
		interval int64
	}{{&hDefault, 1e6}, {&hOwn, 5e5}} {
		require.Eventually(t, func() bool { seq, _ := tc.h.snapshot(); return len(seq) >= 20 }, 20*time.Second, 5*time.Millisecond)
		seq, ns := tc.h.snapshot()
		// A stamp is the wall clock at the send less the send's lateness
		// on the monotonic schedule (publisher/pacer.go), so two stamps
		// differ from the interval by what the wall clock moved against
		// the monotonic one between them: tens of ns of reading skew, or a
		// step (this VM's wall clock steps 0.5 ms at times), at most twice
		// in 20 ticks.
		pairs, off := 0, []int64{}
		for i := 1; i < len(seq); i++ {
			if seq[i] == seq[i-1]+1 {
				if d := ns[i] - ns[i-1] - tc.interval; d < -20e3 || d > 20e3 {
					off = append(off, d)
				}
				pairs++
			}
		}
		assert.GreaterOrEqual(t, pairs, 19)
		assert.LessOrEqual(t, len(off), 2, "stamps %d ns apart, off the interval by %v ns", tc.interval, off)
	}
}

func ExampleClient_Publish() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tickbus.Connect(ctx, tickbus.WithPublisherDefaults(tickbus.WithRate(1000)))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	// The first Publish of a topic makes the client's publisher of it.
	err = c.Publish("example.publish", &tickbus.Tick{Instrument: 7, Kind: tickbus.Trade, Price: 100 * tickbus.PriceScale, Size: 10})
	fmt.Println(err)
	err = c.Publish("no such topic!", &tickbus.Tick{Instrument: 7, Kind: tickbus.Trade, Price: 1, Size: 1})
	fmt.Println(errors.Is(err, tickbus.ErrInvalidOption))
	// Output:
	// <nil>
	// true
}
