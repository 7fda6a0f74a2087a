package feed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/feed"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/tick"
)

// Both publishers of the module's API drive a replay.
var (
	_ feed.Publisher = (*tickbus.Publisher)(nil)
	_ feed.Publisher = (*publisher.Publisher)(nil)
)

// script is a Source of fixed messages, then an optional error.
type script struct {
	msgs [][]tick.Tick
	err  error
	i    int
}

func (s *script) Next() ([]tick.Tick, error) {
	if s.i == len(s.msgs) {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	s.i++
	return s.msgs[s.i-1], nil
}

// fake records what it is asked to publish; it answers back-pressure
// for the first few batches.
type fake struct {
	pressure int
	batches  [][]tick.Tick
	at       []uint64
	taken    map[uint64]bool
}

func (f *fake) PublishBatch(msgs []ring.Tick) (uint64, error) {
	if f.pressure > 0 {
		f.pressure--
		return 0, ring.ErrBackPressure
	}
	var b []tick.Tick
	for _, m := range msgs {
		var tk tick.Tick
		if err := tick.Decode(m.Payload, &tk); err != nil {
			return 0, err
		}
		b = append(b, tk)
	}
	f.batches = append(f.batches, b)
	return 1, nil
}

func (f *fake) PublishAt(seq uint64, typ uint16, payload []byte, ns int64) (uint64, error) {
	if f.taken[seq] {
		return 0, ring.ErrLost
	}
	f.at = append(f.at, seq)
	return seq, nil
}

func msgs(n int) [][]tick.Tick {
	var out [][]tick.Tick
	for i := 0; i < n; i++ {
		exch := int64(1_000_000_000 + i*250_000) // 250µs apart
		out = append(out, []tick.Tick{
			{Instrument: 1, Kind: tick.Trade, Price: 1, Size: 1, ExchTime: exch, ExchSeq: uint64(i + 1)},
			{Instrument: 1, Kind: tick.Bid, Price: 1, Size: 1, ExchTime: exch, ExchSeq: uint64(i + 1), Flags: tick.FlagLastInBatch},
		})
	}
	return out
}

func TestReplay_Paced_PubTimeFollowsExchangeTime(t *testing.T) {
	f := &fake{pressure: 3}
	res, err := feed.Replay(context.Background(), f, &script{msgs: msgs(20)}, feed.Config{Speed: 100})
	require.NoError(t, err)
	assert.True(t, res.Done)
	assert.Equal(t, uint64(40), res.Published)
	require.Len(t, f.batches, 20, "one batch per message; back-pressure retried")
	t0 := f.batches[0][0].PubTime
	for i, b := range f.batches {
		// Intended times: 250µs of exchange time at speed 100 is 2.5µs.
		assert.Equal(t, t0+int64(i)*2_500, b[0].PubTime, "message %d", i)
		assert.Equal(t, b[0].PubTime, b[1].PubTime)
		assert.Equal(t, uint64(i+1), b[1].ExchSeq)
	}
}

func TestReplay_Line_PublishesAtFixedSequences(t *testing.T) {
	f := &fake{taken: map[uint64]bool{3: true, 4: true}}
	res, err := feed.Replay(context.Background(), f, &script{msgs: msgs(3)}, feed.Config{Line: feed.LineB, FirstSeq: 1})
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 5, 6}, f.at)
	assert.Equal(t, uint64(4), res.Published)
	assert.Equal(t, uint64(2), res.Lost)
}

func TestReplay_SourceError_StopsThere(t *testing.T) {
	boom := errors.New("itch: message 3 at byte offset 40: truncated")
	f := &fake{}
	res, err := feed.Replay(context.Background(), f, &script{msgs: msgs(2), err: boom}, feed.Config{})
	require.ErrorIs(t, err, boom)
	assert.False(t, res.Done)
	assert.Len(t, f.batches, 2, "what came before the bad message, nothing after")

	_, err = feed.Replay(context.Background(), f, &script{msgs: [][]tick.Tick{{{Kind: tick.Trade}}}}, feed.Config{})
	assert.ErrorIs(t, err, tick.ErrInvalid, "an invalid tick from a source is refused")

	for _, bad := range []feed.Config{{Speed: -1}, {Line: 'C'}} {
		_, err := feed.Replay(context.Background(), f, &script{}, bad)
		assert.ErrorIs(t, err, feed.ErrInvalidConfig, fmt.Sprint(bad))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = feed.Replay(ctx, f, &script{msgs: msgs(1000)}, feed.Config{Speed: 1e-3})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestParseLine(t *testing.T) {
	for s, want := range map[string]feed.Line{"": feed.NoLine, "A": feed.LineA, "b": feed.LineB} {
		l, err := feed.ParseLine(s)
		require.NoError(t, err)
		assert.Equal(t, want, l)
	}
	_, err := feed.ParseLine("AB")
	assert.ErrorIs(t, err, feed.ErrInvalidConfig)
}

func TestRandom_OneValidTickPerMessage(t *testing.T) {
	r, err := feed.NewRandom(publisher.DefaultFeedConfig())
	require.NoError(t, err)
	for i := 1; i <= 100; i++ {
		ts, err := r.Next()
		require.NoError(t, err)
		require.Len(t, ts, 1)
		require.NoError(t, ts[0].Validate())
		assert.Equal(t, uint64(i), ts[0].ExchSeq)
		assert.NotZero(t, ts[0].Flags&tick.FlagLastInBatch)
	}
	_, err = feed.NewRandom(publisher.FeedConfig{})
	assert.ErrorIs(t, err, publisher.ErrInvalidConfig)
}

// counter publishes nothing and allocates nothing.
type counter struct{ n int }

func (c *counter) PublishBatch(msgs []ring.Tick) (uint64, error) { c.n += len(msgs); return 1, nil }
func (c *counter) PublishAt(seq uint64, _ uint16, _ []byte, _ int64) (uint64, error) {
	c.n++
	return seq, nil
}

func TestReplay_AllocatesNothingPerMessage(t *testing.T) {
	m := msgs(10_000)
	for _, line := range []feed.Line{feed.NoLine, feed.LineA} {
		c := &counter{}
		allocs := testing.AllocsPerRun(3, func() {
			if _, err := feed.Replay(context.Background(), c, &script{msgs: m}, feed.Config{Line: line}); err != nil {
				t.Fatal(err)
			}
		})
		assert.Equal(t, 4*20_000, c.n, "every tick of every run")
		assert.LessOrEqual(t, allocs, 16.0, "line %s: only the replay's set-up allocates, not its 10,000 messages", line)
	}
}
