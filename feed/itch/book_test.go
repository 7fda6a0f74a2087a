package itch

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/itchgen"
	"github.com/tickbus/tickbus/tick"
)

func add(typ byte, locate uint16, ref uint64, side byte, shares, price uint32) []byte {
	m := cat(hdr(typ, locate), b64(ref), []byte{side}, b32(shares), sym, b32(price))
	if typ == 'F' {
		m = append(m, "MPID"...)
	}
	return m
}

// replay returns every tick of the framed messages, or the error.
func replay(t *testing.T, raw []byte) ([]tick.Tick, error) {
	t.Helper()
	f := NewFeed(bytes.NewReader(raw), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	var all []tick.Tick
	for {
		ts, err := f.Next()
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return all, err
		}
		all = append(all, ts...)
	}
}

func TestBook_EveryBookMessage_GivesTheIssuesTicks(t *testing.T) {
	mid := Midnight(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	raw := frame(
		cat(hdr('S', 0), []byte{'O'}),                                               // 1: no tick
		add('A', 5, 1, 'B', 100, 100_0000),                                          // 2: bid 100.00 x 100
		add('F', 5, 2, 'B', 200, 100_0000),                                          // 3: bid 100.00 x 300
		add('A', 5, 3, 'B', 50, 99_0000),                                            // 4: below the best: no tick
		add('A', 5, 4, 'S', 70, 101_0000),                                           // 5: ask 101.00 x 70
		cat(hdr('E', 5), b64(1), b32(40), b64(1)),                                   // 6: trade 100.00 x 40, bid x 260
		cat(hdr('C', 5), b64(2), b32(10), b64(2), []byte{'Y'}, b32(100_5000)),       // 7: trade 100.50 x 10, bid x 250
		cat(hdr('C', 5), b64(2), b32(10), b64(3), []byte{'N'}, b32(100_5000)),       // 8: not printable: bid x 240 only
		cat(hdr('X', 5), b64(1), b32(60)),                                           // 9: order 1 gone, bid x 180
		cat(hdr('D', 5), b64(2)),                                                    // 10: best level gone: bid 99.00 x 50
		cat(hdr('U', 5), b64(4), b64(5), b32(30), b32(100_9000)),                    // 11: ask 100.90 x 30
		cat(hdr('P', 5), b64(0), []byte{'S'}, b32(500), sym, b32(100_2000), b64(4)), // 12: trade only
		cat(hdr('D', 5), b64(5)),                                                    // 13: asks empty: 0 x 0
		cat(hdr('D', 5), b64(3)),                                                    // 14: bids empty
	)
	got, err := replay(t, raw)
	require.NoError(t, err)
	type want struct {
		seq   uint64
		kind  tick.Kind
		price float64
		size  uint64
		last  bool
	}
	exp := []want{
		{2, tick.Bid, 100, 100, true},
		{3, tick.Bid, 100, 300, true},
		{5, tick.Ask, 101, 70, true},
		{6, tick.Trade, 100, 40, false}, {6, tick.Bid, 100, 260, true},
		{7, tick.Trade, 100.5, 10, false}, {7, tick.Bid, 100, 250, true},
		{8, tick.Bid, 100, 240, true},
		{9, tick.Bid, 100, 180, true},
		{10, tick.Bid, 99, 50, true},
		{11, tick.Ask, 100.9, 30, true},
		{12, tick.Trade, 100.2, 500, true},
		{13, tick.Ask, 0, 0, true},
		{14, tick.Bid, 0, 0, true},
	}
	require.Len(t, got, len(exp))
	for i, w := range exp {
		g := got[i]
		assert.Equal(t, w.seq, g.ExchSeq, "tick %d", i)
		assert.Equal(t, w.kind, g.Kind, "tick %d", i)
		assert.Equal(t, tick.PriceFromFloat(w.price), g.Price, "tick %d", i)
		assert.Equal(t, w.size, g.Size, "tick %d", i)
		assert.Equal(t, w.last, g.Flags == tick.FlagLastInBatch, "tick %d flags", i)
		assert.Equal(t, uint64(5), g.Instrument)
		assert.Equal(t, Venue, g.Venue)
		assert.Equal(t, mid+ts, g.ExchTime)
	}
	// 2026-12-01 is EST: midnight in New York is 05:00 UTC.
	assert.Equal(t, time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC).UnixNano(), mid)
}

func TestBook_Inconsistent_StopsWithTheMessageNamed(t *testing.T) {
	good := add('A', 5, 1, 'B', 100, 100_0000)
	for name, c := range map[string]struct {
		bad  []byte
		want error
	}{
		"unknown ref":       {cat(hdr('D', 5), b64(99)), ErrBook},
		"over-executed":     {cat(hdr('E', 5), b64(1), b32(101), b64(1)), ErrBook},
		"over-cancelled":    {cat(hdr('X', 5), b64(1), b32(101)), ErrBook},
		"duplicate ref":     {add('A', 5, 1, 'S', 1, 1), ErrBook},
		"other stock":       {cat(hdr('D', 6), b64(1)), ErrBook},
		"replace, same ref": {cat(hdr('U', 5), b64(1), b64(1), b32(1), b32(1)), nil},
		"bad side":          {add('A', 5, 2, 'Z', 1, 1), ErrMalformed},
		"locate 0":          {add('A', 0, 2, 'B', 1, 1), ErrMalformed},
		"add 0 shares":      {add('A', 5, 2, 'B', 0, 1), ErrMalformed},
		"exec 0 shares":     {cat(hdr('E', 5), b64(1), b32(0), b64(1)), ErrMalformed},
		"replace 0":         {cat(hdr('U', 5), b64(1), b64(2), b32(0), b32(1)), ErrMalformed},
		"2^31 shares":       {add('A', 5, 2, 'S', 1<<31, 1), ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			after := add('A', 5, 7, 'S', 1, 200_0000)
			got, err := replay(t, frame(good, c.bad, after))
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.want)
			var e *Error
			require.True(t, errors.As(err, &e))
			assert.Equal(t, uint64(2), e.Number)
			assert.Equal(t, int64(2+36), e.Offset)
			require.Len(t, got, 1, "nothing after the bad message")
		})
	}
}

func TestBook_GeneratedFile_MatchesNaiveModel(t *testing.T) {
	raw, events := itchgen.Generate(itchgen.Config{Seed: 7, Messages: 50_000, Stocks: 12})
	day := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC) // EDT
	want := itchgen.Expect(events, Midnight(day))
	f := NewFeed(bytes.NewReader(raw), day)
	var got []tick.Tick
	for {
		ts, err := f.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, ts...)
	}
	for i := range want {
		want[i].Venue = Venue
	}
	require.Equal(t, len(want), len(got))
	for i := range want {
		if want[i] != got[i] {
			require.Equal(t, want[i], got[i], "tick %d", i)
		}
	}
	assert.Equal(t, uint64(len(events)), f.Messages())
	assert.Equal(t, int64(len(raw)), f.Consumed())
}

func TestBook_SecondPass_AllocatesNothing(t *testing.T) {
	raw, _ := itchgen.Generate(itchgen.Config{Seed: 3, Messages: 20_000, Stocks: 50, Drain: true})
	br := bytes.NewReader(raw)
	rd := NewReader(br)
	book := NewBook(Venue, 0)
	var out [MaxTicks]tick.Tick
	pass := func() {
		br.Reset(raw)
		rd.Reset(br)
		book.Reset()
		for {
			m, err := rd.Next()
			if err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				return
			}
			if _, err := book.Apply(m, rd.Count(), out[:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	pass() // grow
	require.Equal(t, 0, book.Orders(), "a drained file leaves an empty book")
	allocs := testing.AllocsPerRun(3, pass)
	assert.Zero(t, allocs, "allocations per pass of %d messages", rd.Count())
}

func TestOrders_RemoveKeepsEveryOtherFindable(t *testing.T) {
	var o orders
	o.init(8)
	live := map[uint64]bool{}
	for i := uint64(1); i < 5000; i++ {
		o.insert(newOrder(i*7, int(i%2), 1, 1), uint16(i))
		live[i*7] = true
		if i%3 == 0 {
			r := (i - 1) * 7
			if j := o.find(r); j >= 0 {
				o.remove(j)
				delete(live, r)
			}
		}
	}
	assert.Equal(t, len(live), o.n)
	for r := range live {
		i := o.find(r)
		require.GreaterOrEqual(t, i, 0, "ref %d", r)
		assert.Equal(t, uint16(r/7), o.locs[i], "ref %d kept its locate through the shifts", r)
		assert.Equal(t, int(r/7%2), o.slots[i].side(), "ref %d kept its side", r)
		assert.Equal(t, uint32(1), o.slots[i].shares())
	}
	assert.Equal(t, -1, o.find(3))
}
