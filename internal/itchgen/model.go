package itchgen

import "github.com/tickbus/tickbus/tick"

// Expect is an independent, deliberately naive level-1 model of the
// events: maps of orders and of shares per price, the best found by a
// scan. It returns the ticks the rules ask for, message by
// message, with ExchSeq the 1-based event index and ExchTime midnight plus
// the timestamp. Venue is left zero for the caller to set.
func Expect(events []Event, midnight int64) []tick.Tick {
	type ord struct {
		locate uint16
		side   byte
		shares uint32
		price  uint32
	}
	type bbo struct{ price, shares uint64 }
	orders := map[uint64]*ord{}
	levels := map[uint16]map[byte]map[uint32]uint64{}
	last := map[uint16]map[byte]bbo{}
	lv := func(locate uint16, side byte) map[uint32]uint64 {
		if levels[locate] == nil {
			levels[locate] = map[byte]map[uint32]uint64{'B': {}, 'S': {}}
			last[locate] = map[byte]bbo{}
		}
		return levels[locate][side]
	}
	change := func(o *ord, delta int64) {
		m := lv(o.locate, o.side)
		m[o.price] = uint64(int64(m[o.price]) + delta)
		if m[o.price] == 0 {
			delete(m, o.price)
		}
	}
	best := func(locate uint16, side byte) bbo {
		var b bbo
		for p, s := range lv(locate, side) {
			if b.shares == 0 || side == 'B' && uint64(p) > b.price || side == 'S' && uint64(p) < b.price {
				b = bbo{uint64(p), s}
			}
		}
		return b
	}
	var out []tick.Tick
	for i, e := range events {
		var ts []tick.Tick
		trade := func(price uint32, shares uint32) {
			ts = append(ts, tick.Tick{Kind: tick.Trade, Price: int64(price) * 10_000, Size: uint64(shares)})
		}
		switch e.Type {
		case 'A', 'F':
			o := &ord{locate: e.Locate, side: e.Side, shares: e.Shares, price: e.Price}
			orders[e.Ref] = o
			change(o, int64(e.Shares))
		case 'E', 'C', 'X':
			o := orders[e.Ref]
			if e.Type == 'E' {
				trade(o.price, e.Shares)
			}
			if e.Type == 'C' && e.Printable == 'Y' {
				trade(e.Price, e.Shares)
			}
			change(o, -int64(e.Shares))
			if o.shares -= e.Shares; o.shares == 0 {
				delete(orders, e.Ref)
			}
		case 'D':
			o := orders[e.Ref]
			change(o, -int64(o.shares))
			delete(orders, e.Ref)
		case 'U':
			o := orders[e.Ref]
			change(o, -int64(o.shares))
			delete(orders, e.Ref)
			n := &ord{locate: o.locate, side: o.side, shares: e.Shares, price: e.Price}
			orders[e.NewRef] = n
			change(n, int64(e.Shares))
		case 'P':
			trade(e.Price, e.Shares)
			lv(e.Locate, 'B')
		default:
			continue
		}
		for _, side := range []byte{'B', 'S'} {
			b := best(e.Locate, side)
			if b != last[e.Locate][side] {
				last[e.Locate][side] = b
				k := tick.Bid
				if side == 'S' {
					k = tick.Ask
				}
				ts = append(ts, tick.Tick{Kind: k, Price: int64(b.price) * 10_000, Size: b.shares})
			}
		}
		for j := range ts {
			ts[j].Instrument, ts[j].ExchSeq, ts[j].ExchTime = uint64(e.Locate), uint64(i+1), midnight+e.Timestamp
			if j == len(ts)-1 {
				ts[j].Flags = tick.FlagLastInBatch
			}
		}
		out = append(out, ts...)
	}
	return out
}
