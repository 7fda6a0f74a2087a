package itch

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hand-built bytes: every field written by shifting, independently of the
// decoders under test.
func b16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }
func b32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
func b48(v uint64) []byte {
	return []byte{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}
func b64(v uint64) []byte { return append(b32(uint32(v>>32)), b32(uint32(v))...) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

const ts = 34_200_123_456_789 // 09:30:00.123456789

func hdr(typ byte, locate uint16) []byte {
	return cat([]byte{typ}, b16(locate), b16(0x0102), b48(ts))
}

func frame(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = append(out, b16(uint16(len(m)))...)
		out = append(out, m...)
	}
	return out
}

var sym = []byte("AAPL    ")

// readOne reads exactly one message from the framed bytes.
func readOne(t *testing.T, raw []byte) Message {
	t.Helper()
	rd := NewReader(bytes.NewReader(frame(raw)))
	m, err := rd.Next()
	require.NoError(t, err)
	require.Equal(t, raw, []byte(m))
	assert.Equal(t, raw[0], m.Type())
	assert.Equal(t, uint16(0x0102), m.Tracking())
	assert.Equal(t, int64(ts), m.Timestamp())
	_, err = rd.Next()
	require.ErrorIs(t, err, io.EOF)
	return m
}

func TestMessage_EveryType_DecodesHandBuiltBytes(t *testing.T) {
	cases := []struct {
		name  string
		raw   []byte
		check func(t *testing.T, m Message)
	}{
		{"S system event", cat(hdr('S', 0), []byte{'O'}), func(t *testing.T, m Message) {
			assert.Equal(t, SystemEvent{EventCode: 'O'}, m.SystemEvent())
		}},
		{"R stock directory", cat(hdr('R', 7), sym, []byte{'Q', 'N'}, b32(100), []byte{'N', 'C'}, []byte("Z "),
			[]byte{'P', 'N', ' ', '1', 'N'}, b32(3), []byte{'N'}), func(t *testing.T, m Message) {
			assert.Equal(t, StockDirectory{Stock: Stock(sym), MarketCategory: 'Q', FinancialStatus: 'N', RoundLotSize: 100,
				RoundLotsOnly: 'N', IssueClassification: 'C', IssueSubType: [2]byte{'Z', ' '}, Authenticity: 'P',
				ShortSaleThresholdIndicator: 'N', IPOFlag: ' ', LULDReferencePriceTier: '1', ETPFlag: 'N',
				ETPLeverageFactor: 3, InverseIndicator: 'N'}, m.StockDirectory())
			assert.Equal(t, "AAPL", m.StockDirectory().Stock.String())
			assert.Equal(t, uint16(7), m.Locate())
		}},
		{"H trading action", cat(hdr('H', 7), sym, []byte{'T', ' '}, []byte("MWC1")), func(t *testing.T, m Message) {
			assert.Equal(t, StockTradingAction{Stock: Stock(sym), TradingState: 'T', Reserved: ' ', Reason: [4]byte{'M', 'W', 'C', '1'}}, m.StockTradingAction())
		}},
		{"Y reg SHO", cat(hdr('Y', 7), sym, []byte{'1'}), func(t *testing.T, m Message) {
			assert.Equal(t, RegSHORestriction{Stock: Stock(sym), Action: '1'}, m.RegSHORestriction())
		}},
		{"L participant position", cat(hdr('L', 7), []byte("GSCO"), sym, []byte{'Y', 'N', 'A'}), func(t *testing.T, m Message) {
			assert.Equal(t, ParticipantPosition{MPID: [4]byte{'G', 'S', 'C', 'O'}, Stock: Stock(sym), PrimaryMarketMaker: 'Y',
				MarketMakerMode: 'N', MarketParticipState: 'A'}, m.ParticipantPosition())
		}},
		{"V MWCB decline", cat(hdr('V', 0), b64(1), b64(2_00000000), b64(3<<40)), func(t *testing.T, m Message) {
			v := m.MWCBDeclineLevel()
			assert.Equal(t, MWCBDeclineLevel{Level1: 1, Level2: 2_00000000, Level3: 3 << 40}, v)
			assert.Equal(t, int64(2_00000000), v.Level2.Units())
		}},
		{"W MWCB status", cat(hdr('W', 0), []byte{'2'}), func(t *testing.T, m Message) {
			assert.Equal(t, MWCBStatus{BreachedLevel: '2'}, m.MWCBStatus())
		}},
		{"K IPO quoting", cat(hdr('K', 7), sym, b32(36000), []byte{'A'}, b32(21_5000)), func(t *testing.T, m Message) {
			assert.Equal(t, IPOQuotingPeriod{Stock: Stock(sym), ReleaseTime: 36000, ReleaseQualifier: 'A', IPOPrice: 21_5000}, m.IPOQuotingPeriod())
		}},
		{"J LULD collar", cat(hdr('J', 7), sym, b32(10_0000), b32(11_0000), b32(9_0000), b32(2)), func(t *testing.T, m Message) {
			assert.Equal(t, LULDAuctionCollar{Stock: Stock(sym), ReferencePrice: 10_0000, Upper: 11_0000, Lower: 9_0000, Extension: 2}, m.LULDAuctionCollar())
		}},
		{"h operational halt", cat(hdr('h', 7), sym, []byte{'Q', 'H'}), func(t *testing.T, m Message) {
			assert.Equal(t, OperationalHalt{Stock: Stock(sym), MarketCode: 'Q', Action: 'H'}, m.OperationalHalt())
		}},
		{"A add", cat(hdr('A', 7), b64(0x0102030405060708), []byte{'B'}, b32(300), sym, b32(101_2500)), func(t *testing.T, m Message) {
			a := m.AddOrder()
			assert.Equal(t, AddOrder{Ref: 0x0102030405060708, Side: 'B', Shares: 300, Stock: Stock(sym), Price: 101_2500}, a)
			assert.Equal(t, int64(101_25000000), a.Price.Units(), "Price(4) 101.2500 in 1e-8 units")
		}},
		{"F add MPID", cat(hdr('F', 7), b64(9), []byte{'S'}, b32(100), sym, b32(1), []byte("VIRT")), func(t *testing.T, m Message) {
			assert.Equal(t, AddOrder{Ref: 9, Side: 'S', Shares: 100, Stock: Stock(sym), Price: 1, Attribution: [4]byte{'V', 'I', 'R', 'T'}}, m.AddOrder())
		}},
		{"E executed", cat(hdr('E', 7), b64(9), b32(50), b64(77)), func(t *testing.T, m Message) {
			assert.Equal(t, OrderExecuted{Ref: 9, Shares: 50, Match: 77}, m.OrderExecuted())
		}},
		{"C executed with price", cat(hdr('C', 7), b64(9), b32(50), b64(77), []byte{'Y'}, b32(99_9900)), func(t *testing.T, m Message) {
			assert.Equal(t, OrderExecuted{Ref: 9, Shares: 50, Match: 77, Printable: 'Y', Price: 99_9900}, m.OrderExecuted())
		}},
		{"X cancel", cat(hdr('X', 7), b64(9), b32(25)), func(t *testing.T, m Message) {
			assert.Equal(t, OrderCancel{Ref: 9, Shares: 25}, m.OrderCancel())
		}},
		{"D delete", cat(hdr('D', 7), b64(9)), func(t *testing.T, m Message) {
			assert.Equal(t, OrderDelete{Ref: 9}, m.OrderDelete())
		}},
		{"U replace", cat(hdr('U', 7), b64(9), b64(10), b32(400), b32(100_0100)), func(t *testing.T, m Message) {
			assert.Equal(t, OrderReplace{OldRef: 9, NewRef: 10, Shares: 400, Price: 100_0100}, m.OrderReplace())
		}},
		{"P trade", cat(hdr('P', 7), b64(0), []byte{'B'}, b32(200), sym, b32(100_0000), b64(78)), func(t *testing.T, m Message) {
			assert.Equal(t, Trade{Ref: 0, Side: 'B', Shares: 200, Stock: Stock(sym), Price: 100_0000, Match: 78}, m.Trade())
		}},
		{"Q cross trade", cat(hdr('Q', 7), b64(1_000_000), sym, b32(100_0000), b64(79), []byte{'O'}), func(t *testing.T, m Message) {
			assert.Equal(t, CrossTrade{Shares: 1_000_000, Stock: Stock(sym), Price: 100_0000, Match: 79, CrossType: 'O'}, m.CrossTrade())
		}},
		{"B broken trade", cat(hdr('B', 7), b64(79)), func(t *testing.T, m Message) {
			assert.Equal(t, BrokenTrade{Match: 79}, m.BrokenTrade())
		}},
		{"I NOII", cat(hdr('I', 7), b64(5000), b64(700), []byte{'B'}, sym, b32(1), b32(2), b32(3), []byte{'O', 'L'}), func(t *testing.T, m Message) {
			assert.Equal(t, NOII{PairedShares: 5000, ImbalanceShares: 700, Direction: 'B', Stock: Stock(sym), FarPrice: 1, NearPrice: 2,
				RefPrice: 3, CrossType: 'O', PriceVariation: 'L'}, m.NOII())
		}},
		{"N RPII", cat(hdr('N', 7), sym, []byte{'A'}), func(t *testing.T, m Message) {
			assert.Equal(t, RPII{Stock: Stock(sym), Interest: 'A'}, m.RPII())
		}},
		{"O direct listing", cat(hdr('O', 7), sym, []byte{'Y'}, b32(1), b32(2), b32(3), b64(4), b32(5), b32(6)), func(t *testing.T, m Message) {
			assert.Equal(t, DirectListingCapital{Stock: Stock(sym), OpenEligibility: 'Y', MinPrice: 1, MaxPrice: 2, NearPrice: 3,
				NearTime: 4, LowerCollar: 5, UpperCollar: 6}, m.DirectListingCapital())
		}},
	}
	seen := map[byte]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, int(Lengths[c.raw[0]]), len(c.raw), "hand-built length of type %q", c.raw[0])
			m := readOne(t, c.raw)
			c.check(t, m)
			// One byte short or long is refused with the message named.
			for _, l := range []int{len(c.raw) - 1, len(c.raw) + 1} {
				bad := append(append([]byte{}, c.raw...), 0)[:l]
				rd := NewReader(bytes.NewReader(frame(bad)))
				_, err := rd.Next()
				require.ErrorIs(t, err, ErrMalformed, "length %d", l)
				var e *Error
				require.True(t, errors.As(err, &e))
				assert.Equal(t, uint64(1), e.Number)
				assert.Equal(t, int64(0), e.Offset)
			}
		})
		seen[c.raw[0]] = true
	}
	for typ, l := range Lengths {
		if l != 0 {
			assert.True(t, seen[byte(typ)], "type %q has no hand-built test", typ)
		}
	}
	assert.Len(t, seen, 23, "ITCH 5.0 has 23 message types")
}

func TestReader_Truncated_NamesMessageAndOffset(t *testing.T) {
	del := cat(hdr('D', 7), b64(9))      // 19 bytes, 21 framed
	sys := cat(hdr('S', 0), []byte{'O'}) // 12 bytes, 14 framed
	full := frame(sys, del, del)
	for cut := 14 + 21 + 1; cut < len(full); cut++ { // inside the third message
		rd := NewReader(bytes.NewReader(full[:cut]))
		for i := 0; i < 2; i++ {
			_, err := rd.Next()
			require.NoError(t, err)
		}
		_, err := rd.Next()
		require.ErrorIs(t, err, ErrTruncated, "cut at %d", cut)
		var e *Error
		require.True(t, errors.As(err, &e))
		assert.Equal(t, uint64(3), e.Number)
		assert.Equal(t, int64(35), e.Offset)
		assert.Contains(t, err.Error(), "message 3 at byte offset 35")
		_, again := rd.Next()
		assert.Equal(t, err, again, "the reader stops at the first error")
	}
}

func TestReader_BadLengthsAndTypes(t *testing.T) {
	for name, raw := range map[string][]byte{
		"zero length":  {0, 0},
		"unknown type": frame(cat([]byte{'Z'}, make([]byte, 11))),
		"too long":     cat(b16(51), make([]byte, 51)),
	} {
		_, err := NewReader(bytes.NewReader(raw)).Next()
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}

// oneByte reads one byte at a time: the Reader must refill across
// messages.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestReader_SmallReads(t *testing.T) {
	del := cat(hdr('D', 7), b64(9))
	raw := frame(del, del, del)
	rd := NewReader(oneByte{bytes.NewReader(raw)})
	for i := 0; i < 3; i++ {
		m, err := rd.Next()
		require.NoError(t, err)
		assert.Equal(t, uint64(9), m.OrderDelete().Ref)
		assert.Equal(t, int64(21*i), rd.Offset())
	}
	_, err := rd.Next()
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, int64(len(raw)), rd.Consumed())
}

func TestReader_ReadError_AfterTheWholeMessages(t *testing.T) {
	boom := errors.New("disk on fire")
	del := cat(hdr('D', 7), b64(9))
	raw := frame(del, del)
	rd := NewReader(io.MultiReader(bytes.NewReader(raw[:30]), iotest.ErrReader(boom)))
	_, err := rd.Next()
	require.NoError(t, err, "the first message is whole")
	_, err = rd.Next()
	require.ErrorIs(t, err, boom)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, uint64(2), e.Number)
	assert.Equal(t, int64(21), e.Offset)
}
