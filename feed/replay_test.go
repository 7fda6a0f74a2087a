package feed_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/feed"
	"github.com/tickbus/tickbus/feed/itch"
	"github.com/tickbus/tickbus/internal/itchgen"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// collect keeps every delivered tick with its topic sequence, and every
// event.
type collect struct {
	mu     sync.Mutex
	seqs   []uint64
	ticks  []tick.Tick
	events []ring.Event
	bad    int
}

func (c *collect) OnTicks(ts []ring.Tick) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		var tk tick.Tick
		if t.Type != tick.MessageType || tick.Decode(t.Payload, &tk) != nil {
			c.bad++
			continue
		}
		c.seqs = append(c.seqs, t.Seq)
		c.ticks = append(c.ticks, tk)
	}
}

func (c *collect) OnEvent(ev ring.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *collect) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ticks)
}

type rig struct {
	ctx  context.Context
	t    *testing.T
	url  string
	host string
}

func newRig(t *testing.T) (*rig, context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
	return &rig{ctx: ctx, t: t}, ctx
}

func (r *rig) node(id string) (*bus.Node, *link.Devices) {
	// A long lease (and heartbeat timeout): these tests are about replay, and with the short
	// default a loaded CI host misses renewals and fails over mid-replay
	// (seen as epoch events and sequences from 4194305).
	cfg := bus.Config{NodeID: id, LeaseTTL: 30 * time.Second, HeartbeatTimeout: 10 * time.Second}
	if r.url != "" {
		cfg.NATS = bus.NATSConfig{URLs: []string{r.url}}
	}
	n, err := bus.Open(r.ctx, cfg)
	require.NoError(r.t, err)
	r.t.Cleanup(func() { _ = n.Close() })
	if r.url == "" {
		r.url = n.ClientURL()
	}
	d := link.NewDevices(link.DevicesConfig{HostID: n.HostID()})
	r.t.Cleanup(func() { _ = d.Close() })
	return n, d
}

// writeFile writes a generated ITCH file and returns its path and the
// ticks an independent model expects from it.
func writeFile(t *testing.T, seed uint64, messages int, day time.Time) (string, []tick.Tick) {
	raw, events := itchgen.Generate(itchgen.Config{Seed: seed, Messages: messages, Stocks: 6})
	path := filepath.Join(t.TempDir(), "12012026.NASDAQ_ITCH50")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	want := itchgen.Expect(events, itch.Midnight(day))
	for i := range want {
		want[i].Venue = itch.Venue
	}
	return path, want
}

func openFeed(t *testing.T, path string, day time.Time) *itch.Feed {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return itch.NewFeed(f, day)
}

// check compares what the subscriber got with the model: every tick once,
// in order, at consecutive sequences, nothing lost.
func check(t *testing.T, c *collect, want []tick.Tick) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.events, "no gap, overrun or skip")
	assert.Zero(t, c.bad)
	require.Len(t, c.ticks, len(want))
	for i := range want {
		got := c.ticks[i]
		got.PubTime = 0
		if got != want[i] || c.seqs[i] != uint64(i+1) {
			require.Equal(t, want[i], got, "tick %d", i)
			require.Equal(t, uint64(i+1), c.seqs[i], "sequence of tick %d", i)
		}
	}
}

// waitAll waits (bounded: a loaded machine is slow, not wrong) until the
// subscriber has n ticks, and says what it has if it never does.
func waitAll(t *testing.T, c *collect, sub *subscriber.Subscriber, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c.count() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := c.count(); got < n {
		c.mu.Lock()
		ev := append([]ring.Event(nil), c.events...)
		c.mu.Unlock()
		t.Fatalf("subscriber has %d of %d ticks; events %v; counters %+v", got, n, ev, sub.Counters())
	}
}

func TestReplay_ITCHFile_EndToEnd_MatchesIndependentBook(t *testing.T) {
	r, ctx := newRig(t)
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	path, want := writeFile(t, 21, 20_000, day)
	require.NotEmpty(t, want)

	pubNode, pubDevs := r.node("pub")
	subNode, subDevs := r.node("sub")
	var c collect
	sub, err := subscriber.New(ctx, subNode, subDevs, subscriber.Config{Topic: "md.nasdaq.itch", Mode: ring.Reliable,
		Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() }) // before the devices go, even when the test fails
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	pub, err := publisher.New(ctx, pubNode, pubDevs, publisher.Config{Topic: "md.nasdaq.itch", Idle: rdma.Yield{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	require.NoError(t, pub.WaitSubscribers(ctx, 1))

	var progress []feed.Result
	res, err := feed.Replay(ctx, pub, openFeed(t, path, day), feed.Config{
		Progress: func(r feed.Result) { progress = append(progress, r) }, ProgressEvery: time.Millisecond})
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, uint64(len(want)), res.Published)
	assert.Equal(t, uint64(20_000), res.Messages, "every message read")
	st, _ := os.Stat(path)
	assert.Equal(t, st.Size(), res.Bytes)
	require.NotEmpty(t, progress)
	assert.Equal(t, res.Published, progress[len(progress)-1].Published, "the last progress report is the end")

	waitAll(t, &c, sub, len(want))
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	check(t, &c, want)
}

// dropLine is line B's link losing 1% of the feed's messages at random:
// their ticks are never published by this line.
type dropLine struct {
	p       feed.Publisher
	drop    map[uint64]bool // exchange sequences this line loses
	dropped atomic.Int64    // ticks not sent
}

func (d *dropLine) PublishBatch(msgs []ring.Tick) (uint64, error) { return d.p.PublishBatch(msgs) }

func (d *dropLine) PublishAt(seq uint64, typ uint16, payload []byte, ns int64) (uint64, error) {
	var tk tick.Tick
	if err := tick.Decode(payload, &tk); err != nil {
		return 0, err
	}
	if d.drop[tk.ExchSeq] {
		d.dropped.Add(1)
		return seq, nil // sent, as far as this line knows; lost on the way
	}
	return d.p.PublishAt(seq, typ, payload, ns)
}

func TestReplay_ABLines_OneDropsOnePercent_NoTickMissing(t *testing.T) {
	r, ctx := newRig(t)
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const messages = 20_000
	path, want := writeFile(t, 33, messages, day)

	nodeA, devsA := r.node("line-a")
	nodeB, devsB := r.node("line-b")
	subNode, subDevs := r.node("sub")
	var c collect
	sub, err := subscriber.New(ctx, subNode, subDevs, subscriber.Config{Topic: "md.nasdaq.ab", Mode: ring.Reliable,
		Idle: rdma.Yield{}, StatsInterval: -1}, &c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() }) // before the devices go, even when the test fails
	runErr := make(chan error, 1)
	go func() { runErr <- sub.Run(ctx) }()
	// A line ahead of the other waits for it to fill what it dropped; on a
	// loaded two-core machine the other can be far behind, so the window is
	// wide here (the default, 1ms, suits lines microseconds apart).
	pcfg := publisher.Config{Topic: "md.nasdaq.ab", Idle: rdma.Yield{}, ArbitrationWindow: 10 * time.Second}
	pcfg.ID = "A"
	pubA, err := publisher.New(ctx, nodeA, devsA, pcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pubA.Close() })
	pcfg.ID = "B"
	pubB, err := publisher.New(ctx, nodeB, devsB, pcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pubB.Close() })
	require.NoError(t, pubA.WaitSubscribers(ctx, 1))
	require.NoError(t, pubB.WaitSubscribers(ctx, 1))

	rng := rand.New(rand.NewPCG(5, 6))
	lossy := &dropLine{p: pubB, drop: map[uint64]bool{}}
	for seq := uint64(1); seq <= messages+7; seq++ {
		if rng.IntN(100) == 0 {
			lossy.drop[seq] = true
		}
	}
	type out struct {
		res feed.Result
		err error
	}
	results := make(chan out, 2)
	// The lossy line starts first, so it is ahead when it drops and must
	// wait for line A to fill the hole; then the two race.
	go func() {
		res, err := feed.Replay(ctx, lossy, openFeed(t, path, day), feed.Config{Line: feed.LineB})
		results <- out{res, err}
	}()
	require.Eventually(t, func() bool { return lossy.dropped.Load() > 0 }, 60*time.Second, time.Millisecond)
	go func() {
		res, err := feed.Replay(ctx, pubA, openFeed(t, path, day), feed.Config{Line: feed.LineA})
		results <- out{res, err}
	}()
	var published, lost uint64
	for i := 0; i < 2; i++ {
		o := <-results
		require.NoError(t, o.err)
		assert.Equal(t, uint64(len(want)), o.res.Ticks)
		assert.Positive(t, o.res.Published, "both lines published")
		published += o.res.Published
		lost += o.res.Lost
	}
	assert.Positive(t, lossy.dropped.Load(), "line B dropped ticks")
	assert.Equal(t, uint64(len(want)), published-uint64(lossy.dropped.Load()), "every tick published once by one line (B counts the ones it lost)")
	assert.Equal(t, uint64(len(want))-uint64(lossy.dropped.Load()), lost, "the other copy of every tick both lines sent lost the arbitration")

	waitAll(t, &c, sub, len(want))
	require.NoError(t, sub.Close())
	require.NoError(t, <-runErr)
	check(t, &c, want)
}
