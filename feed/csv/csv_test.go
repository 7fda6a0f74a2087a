package csv

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/tick"
)

func readAll(t *testing.T, in string) ([][]tick.Tick, error) {
	t.Helper()
	r, err := NewReader(strings.NewReader(in), "XNAS")
	require.NoError(t, err)
	var msgs [][]tick.Tick
	for {
		ts, err := r.Next()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, append([]tick.Tick(nil), ts...))
	}
}

func TestReader_ParsesAndGroupsByExchangeSeq(t *testing.T) {
	in := "time,instrument,kind,price,size,exchange_seq\n" +
		"2026-12-01T09:30:00.000000001-05:00,7,trade,101.25,300,10\n" +
		"2026-12-01T09:30:00.000000001-05:00,7,bid,101.2,500,10\n" +
		"1796135400000000002,7,A,101.3,200,11\n" +
		"1796135400000000003, 8 ,ask,-0.00000001,0,\n" +
		"1796135400000000004,8,b,5,1,0\n"
	msgs, err := readAll(t, in)
	require.NoError(t, err)
	require.Len(t, msgs, 4)
	v := tick.Venue{'X', 'N', 'A', 'S'}
	assert.Equal(t, []tick.Tick{
		{Instrument: 7, Venue: v, Kind: tick.Trade, Price: 101_25000000, Size: 300, ExchTime: 1796135400000000001, ExchSeq: 10},
		{Instrument: 7, Venue: v, Kind: tick.Bid, Price: 101_20000000, Size: 500, ExchTime: 1796135400000000001, ExchSeq: 10, Flags: tick.FlagLastInBatch},
	}, msgs[0])
	assert.Equal(t, tick.Tick{Instrument: 7, Venue: v, Kind: tick.Ask, Price: 101_30000000, Size: 200, ExchTime: 1796135400000000002, ExchSeq: 11, Flags: tick.FlagLastInBatch}, msgs[1][0])
	assert.Equal(t, int64(-1), msgs[2][0].Price)
	assert.Equal(t, uint64(0), msgs[2][0].ExchSeq)
	assert.Len(t, msgs[3], 1, "exchange_seq 0: a message of its own")
}

func TestReader_BadLines_NameLineAndColumn(t *testing.T) {
	const h = "time,instrument,kind,price,size,exchange_seq\n"
	const ok = "1,7,trade,1,1,1\n"
	for name, c := range map[string]struct {
		in       string
		line     int
		col      int
		good     int // messages before the error
		contains string
	}{
		"price":        {h + ok + "2,7,trade,1.123456789,1,2\n", 3, 4, 1, "column 4 (price)"},
		"kind":         {h + ok + "2,7,quote,1,1,2\n", 3, 3, 1, "column 3 (kind)"},
		"instrument 0": {h + "2,0,bid,1,1,2\n", 2, 2, 0, "column 2 (instrument)"},
		"time":         {h + "yesterday,1,bid,1,1,2\n", 2, 1, 0, "column 1 (time)"},
		"size":         {h + "1,1,bid,1,-1,2\n", 2, 5, 0, "column 5 (size)"},
		"seq":          {h + "1,1,bid,1,1,x\n", 2, 6, 0, "column 6 (exchange_seq)"},
		"columns":      {h + ok + ok + "1,1,bid\n", 4, 0, 1, "line 4"},
		"header":       {"time,instrument,kind,price,qty,exchange_seq\n" + ok, 1, 5, 0, `want "size"`},
		"empty":        {"", 1, 0, 0, "empty file"},
		"quote":        {h + "1,1,\"bid,1,1,2\n", 2, 0, 0, "line 2"},
		"batch":        {h + strings.Repeat(ok, MaxBatch+1), 18, 6, 0, "more than 16"},
	} {
		t.Run(name, func(t *testing.T) {
			msgs, err := readAll(t, c.in)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformed)
			var e *Error
			require.True(t, errors.As(err, &e), "%v", err)
			assert.Equal(t, c.line, e.Line, "%v", err)
			if c.col != 0 {
				assert.Equal(t, c.col, e.Column, "%v", err)
			}
			assert.Contains(t, err.Error(), c.contains)
			assert.Len(t, msgs, c.good, "messages before the bad line, none after")
		})
	}
}

func TestParsePrice(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1": 1e8, "101.25": 101_25000000, ".5": 50000000, "-2.00000001": -200000001, "+3.": 3e8} {
		got, ok := ParsePrice(s)
		assert.True(t, ok, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", ".", "-", "1.2.3", "1e5", "1.123456789", "99999999999999999999", "92233720369"} {
		_, ok := ParsePrice(s)
		assert.False(t, ok, s)
	}
}

// FuzzReader: any bytes give messages of valid ticks, then io.EOF or an
// *Error; never a panic.
func FuzzReader(f *testing.F) {
	f.Add("time,instrument,kind,price,size,exchange_seq\n1,7,trade,1.5,1,1\n1,7,bid,1,1,1\n2,8,ask,3,4,0\n")
	f.Add("time,instrument,kind,price,size,exchange_seq\n\"1\",7,t,1,1,\n")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, in string) {
		r, err := NewReader(strings.NewReader(in), "")
		if err != nil {
			t.Fatal(err)
		}
		for {
			ts, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v is not a malformed *Error", err)
				}
				if _, again := r.Next(); again != err {
					t.Fatalf("Next after an error: %v", again)
				}
				return
			}
			if len(ts) == 0 || len(ts) > MaxBatch || ts[len(ts)-1].Flags&tick.FlagLastInBatch == 0 {
				t.Fatalf("message of %d ticks, last flags %v", len(ts), ts[len(ts)-1].Flags)
			}
			for i := range ts {
				if err := ts[i].Validate(); err != nil {
					t.Fatalf("invalid tick: %v", err)
				}
			}
		}
	})
}
