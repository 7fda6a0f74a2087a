package publisher

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/tick"
)

func TestFeed_Next_WalksPricesAndCyclesInstruments(t *testing.T) {
	cfg := DefaultFeedConfig()
	cfg.Instruments = 3
	cfg.FirstInstrument = 10
	f, err := NewFeed(cfg)
	require.NoError(t, err)

	step := tick.PriceFromFloat(cfg.TickSize)
	last := map[uint64]int64{}
	kinds := map[tick.Kind]int{}
	var tk tick.Tick
	for i := 0; i < 3000; i++ {
		f.Next(&tk, int64(i))
		require.NoError(t, tk.Validate())
		assert.Equal(t, uint64(10+i%3), tk.Instrument)
		assert.Equal(t, uint64(i+1), tk.ExchSeq)
		assert.Equal(t, int64(i), tk.ExchTime)
		assert.Equal(t, "XTBS", tk.Venue.String())
		assert.NotZero(t, tk.Size)
		assert.Zero(t, tk.Price%step, "prices stay on the tick grid")
		if p, ok := last[tk.Instrument]; ok {
			// A quote or trade is within the spread of a bid that moved
			// at most one step.
			assert.LessOrEqual(t, abs(tk.Price-p), 3*step)
		}
		last[tk.Instrument] = tk.Price
		kinds[tk.Kind]++
	}
	assert.Len(t, kinds, 3, "trades, bids and asks all appear")
	// 20% trades, within a wide margin for 3000 draws.
	assert.InDelta(t, 600, kinds[tick.Trade], 150)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestFeed_SameSeed_SameTicks(t *testing.T) {
	a, err := NewFeed(DefaultFeedConfig())
	require.NoError(t, err)
	b, err := NewFeed(DefaultFeedConfig())
	require.NoError(t, err)
	other := DefaultFeedConfig()
	other.Seed = 2
	c, err := NewFeed(other)
	require.NoError(t, err)
	var ta, tb, tc tick.Tick
	differ := false
	for i := 0; i < 100; i++ {
		a.Next(&ta, 0)
		b.Next(&tb, 0)
		c.Next(&tc, 0)
		require.Equal(t, ta, tb)
		differ = differ || ta != tc
	}
	assert.True(t, differ, "another seed gives another walk")
}

func TestFeedConfig_Validate_NamesTheBadField(t *testing.T) {
	cases := map[string]struct {
		mutate func(*FeedConfig)
		want   string
	}{
		"instruments": {func(c *FeedConfig) { c.Instruments = 0 }, "instruments 0"},
		"first":       {func(c *FeedConfig) { c.FirstInstrument = 0 }, "first instrument id 0"},
		"tick size":   {func(c *FeedConfig) { c.TickSize = -1 }, "tick size -1"},
		"tiny tick":   {func(c *FeedConfig) { c.TickSize = 1e-12 }, "tick size 1e-12"},
		"price":       {func(c *FeedConfig) { c.StartPrice = 0 }, "start price 0"},
		"ratio":       {func(c *FeedConfig) { c.TradeRatio = 1.5 }, "trade ratio 1.5"},
		"venue":       {func(c *FeedConfig) { c.Venue = "nasdaq" }, `"nasdaq"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := DefaultFeedConfig()
			tc.mutate(&c)
			_, err := NewFeed(c)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFeed_Next_AllocatesNothing(t *testing.T) {
	f, err := NewFeed(DefaultFeedConfig())
	require.NoError(t, err)
	var tk tick.Tick
	assert.Zero(t, testing.AllocsPerRun(1000, func() { f.Next(&tk, 1) }))
}

func TestPacer_Wait_SchedulesFromIntendedTimeNotLastSend(t *testing.T) {
	p, err := NewPacer(1000) // one send per ms
	require.NoError(t, err)
	first, ok := p.Wait(rdma.Yield{}, nil)
	require.True(t, ok)
	// Stall, as a publisher blocked on a slow consumer would.
	time.Sleep(30 * time.Millisecond)
	for i := 1; i <= 5; i++ {
		got, ok := p.Wait(rdma.Yield{}, nil)
		require.True(t, ok)
		// Its slot, 30 ms before a schedule restarted at the stall's end
		// would put it; the slack is for steps of the wall clock (stamps
		// follow it), 0.5 ms at times on this project's VM.
		assert.InDelta(t, first+int64(i)*int64(time.Millisecond), got, float64(5*time.Millisecond), "send %d keeps its slot in the schedule", i)
		assert.LessOrEqual(t, got, time.Now().UnixNano(), "never returns before the intended time")
	}
	assert.Greater(t, p.Behind(), 20*time.Millisecond, "the stall shows as lateness, not as a later schedule")
}

// Stamps are on the wall clock of the moment of the send, as subscribers
// read it: a step of the wall clock during a run moves the stamps with it
// instead of adding itself to every latency.
func TestPacer_Wait_StampsFollowTheWallClock(t *testing.T) {
	p, err := NewPacer(1000)
	require.NoError(t, err)
	var shift int64
	p.wallNs = func() int64 { return time.Now().UnixNano() + shift }
	first, ok := p.Wait(rdma.Yield{}, nil)
	require.True(t, ok)
	shift = int64(time.Hour) // the wall clock is stepped an hour ahead
	got, ok := p.Wait(rdma.Yield{}, nil)
	require.True(t, ok)
	assert.Greater(t, got-first, int64(59*time.Minute), "the stamp did not follow the step")
	assert.LessOrEqual(t, got, p.wallNs(), "never stamped after the wall clock's now")
}

func TestPacer_Wait_StopsWhenAsked(t *testing.T) {
	p, err := NewPacer(0.5) // next send 2 s away after the first
	require.NoError(t, err)
	_, ok := p.Wait(rdma.Yield{}, nil)
	require.True(t, ok)
	calls := 0
	_, ok = p.Wait(rdma.Yield{}, func() bool { calls++; return calls > 2 })
	assert.False(t, ok)
}

func TestPacer_Unpaced_IntendsNow(t *testing.T) {
	p, err := NewPacer(0)
	require.NoError(t, err)
	before := time.Now().UnixNano()
	got, ok := p.Wait(rdma.Yield{}, nil)
	require.True(t, ok)
	assert.GreaterOrEqual(t, got, before)
	assert.LessOrEqual(t, got, time.Now().UnixNano())
	assert.Zero(t, p.Behind())
}

func TestPacer_RejectsBadRates(t *testing.T) {
	for _, r := range []float64{-1, 2e9} {
		_, err := NewPacer(r)
		assert.ErrorIs(t, err, ErrInvalidConfig)
	}
}

func TestPacer_Wait_AllocatesNothing(t *testing.T) {
	p, err := NewPacer(1e9) // always due: the stamp path every call
	require.NoError(t, err)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = p.Wait(rdma.Yield{}, nil) }))
}
