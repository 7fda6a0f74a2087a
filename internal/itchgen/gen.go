// Package itchgen writes synthetic TotalView-ITCH 5.0 files for tests and
// benchmarks: a reproducible mix of order-book messages (A, F, E, C, X, D,
// U, P) over a few stocks, interleaved with the other message types, and
// the list of what it wrote, so that a test can keep its own book from
// the events rather than from the bytes.
package itchgen

import (
	"encoding/binary"
	"math/rand/v2"
)

// Event is one generated message, as the generator meant it.
type Event struct {
	Type      byte
	Locate    uint16
	Timestamp int64 // ns since midnight
	Ref       uint64
	NewRef    uint64 // U
	Side      byte   // A, F, P
	Shares    uint32
	Price     uint32 // Price(4): A, F, C, U, P
	Printable byte   // C
}

// Config shapes a file.
type Config struct {
	Seed     uint64
	Messages int  // about this many (Drain adds the deletes at the end)
	Stocks   int  // stock locates 1..Stocks (default 8)
	Drain    bool // end with a D for every resting order: an empty book
}

// Lengths of each type, the type byte included.
var lengths = map[byte]int{
	'S': 12, 'R': 39, 'H': 25, 'Y': 20, 'L': 26, 'V': 35, 'W': 12, 'K': 28, 'J': 35, 'h': 21,
	'A': 36, 'F': 40, 'E': 31, 'C': 36, 'X': 23, 'D': 19, 'U': 35, 'P': 44, 'Q': 40, 'B': 19,
	'I': 50, 'N': 20, 'O': 48,
}

var be = binary.BigEndian

type live struct {
	locate uint16
	side   byte
	shares uint32
	price  uint32
}

type gen struct {
	rng    *rand.Rand
	out    []byte
	events []Event
	ts     int64
	match  uint64
	next   uint64
	orders map[uint64]*live
	refs   []uint64
	index  map[uint64]int
	mid    []uint32
}

// Generate writes a file and returns it with its events, one per message.
func Generate(cfg Config) ([]byte, []Event) {
	if cfg.Stocks <= 0 {
		cfg.Stocks = 8
	}
	g := &gen{rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5851f42d4c957f2d)), ts: 34_200_000_000_000,
		orders: map[uint64]*live{}, index: map[uint64]int{}, next: 1, mid: make([]uint32, cfg.Stocks+1)}
	g.other('S', 0)
	for s := 1; s <= cfg.Stocks; s++ {
		g.mid[s] = uint32(50_0000 + g.rng.IntN(200)*1_0000)
		g.other('R', uint16(s))
	}
	for len(g.events) < cfg.Messages {
		g.step(uint16(1 + g.rng.IntN(cfg.Stocks)))
	}
	if cfg.Drain {
		for len(g.refs) > 0 {
			ref := g.refs[len(g.refs)-1]
			g.emit(Event{Type: 'D', Locate: g.orders[ref].locate, Ref: ref})
			g.drop(ref)
		}
	}
	return g.out, g.events
}

func (g *gen) step(locate uint16) {
	r := g.rng.IntN(1000)
	switch {
	case r < 10:
		types := []byte("HYLVWKJhQBINO")
		g.other(types[g.rng.IntN(len(types))], locate)
		return
	case r < 40:
		g.emit(Event{Type: 'P', Locate: locate, Ref: 0, Side: "BS"[g.rng.IntN(2)], Shares: g.shares(), Price: g.mid[locate]})
		return
	case r < g.addCut() || len(g.refs) < 20:
		side := "BS"[g.rng.IntN(2)]
		if g.rng.IntN(50) == 0 { // walk the mid now and then
			g.mid[locate] = uint32(int64(g.mid[locate]) + int64(g.rng.IntN(3)-1)*100)
		}
		typ := byte('A')
		if g.rng.IntN(10) == 0 {
			typ = 'F'
		}
		e := Event{Type: typ, Locate: locate, Ref: g.next, Side: side, Shares: g.shares(), Price: g.price(locate, side)}
		g.next += 1 + uint64(g.rng.IntN(3))
		g.emit(e)
		g.orders[e.Ref] = &live{locate: locate, side: side, shares: e.Shares, price: e.Price}
		g.index[e.Ref] = len(g.refs)
		g.refs = append(g.refs, e.Ref)
		return
	}
	// Like a real day, most orders that go are recent ones.
	i := g.rng.IntN(len(g.refs))
	if g.rng.IntN(10) != 0 {
		i = len(g.refs) - 1 - g.rng.IntN(min(64, len(g.refs)))
	}
	ref := g.refs[i]
	o := g.orders[ref]
	switch r = g.rng.IntN(100); {
	case r < 15: // E
		sh := 1 + uint32(g.rng.IntN(int(o.shares)))
		g.emit(Event{Type: 'E', Locate: o.locate, Ref: ref, Shares: sh})
		g.reduce(ref, sh)
	case r < 25: // C
		sh := 1 + uint32(g.rng.IntN(int(o.shares)))
		pr := byte('Y')
		if g.rng.IntN(3) == 0 {
			pr = 'N'
		}
		g.emit(Event{Type: 'C', Locate: o.locate, Ref: ref, Shares: sh, Printable: pr, Price: o.price + uint32(g.rng.IntN(3))*100})
		g.reduce(ref, sh)
	case r < 45: // X
		sh := 1 + uint32(g.rng.IntN(int(o.shares)))
		g.emit(Event{Type: 'X', Locate: o.locate, Ref: ref, Shares: sh})
		g.reduce(ref, sh)
	case r < 75: // D
		g.emit(Event{Type: 'D', Locate: o.locate, Ref: ref})
		g.drop(ref)
	default: // U
		nr := g.next
		g.next++
		e := Event{Type: 'U', Locate: o.locate, Ref: ref, NewRef: nr, Shares: g.shares(), Price: g.price(o.locate, o.side)}
		g.emit(e)
		side, loc := o.side, o.locate
		g.drop(ref)
		g.orders[nr] = &live{locate: loc, side: side, shares: e.Shares, price: e.Price}
		g.index[nr] = len(g.refs)
		g.refs = append(g.refs, nr)
	}
}

// addCut keeps the book near 200 resting orders a stock: adds are 43% of
// messages below that, 30% above.
func (g *gen) addCut() int {
	if len(g.refs) < 200*(len(g.mid)-1) {
		return 470
	}
	return 340
}

func (g *gen) shares() uint32 { return 100 * uint32(1+g.rng.IntN(10)) }

func (g *gen) price(locate uint16, side byte) uint32 {
	off := uint32(1+g.rng.IntN(10)) * 100
	if side == 'B' {
		return g.mid[locate] - off
	}
	return g.mid[locate] + off
}

func (g *gen) reduce(ref uint64, sh uint32) {
	o := g.orders[ref]
	if o.shares -= sh; o.shares == 0 {
		g.drop(ref)
	}
}

func (g *gen) drop(ref uint64) {
	i := g.index[ref]
	last := g.refs[len(g.refs)-1]
	g.refs[i] = last
	g.index[last] = i
	g.refs = g.refs[:len(g.refs)-1]
	delete(g.index, ref)
	delete(g.orders, ref)
}

// other writes a message of a type the book ignores, its fields filled
// with plausible bytes.
func (g *gen) other(typ byte, locate uint16) {
	if typ == 'S' || typ == 'V' || typ == 'W' || typ == 'B' || typ == 'Q' || typ == 'L' {
		if typ != 'Q' && typ != 'L' {
			locate = 0
		}
	}
	g.emit(Event{Type: typ, Locate: locate})
}

func (g *gen) emit(e Event) {
	g.ts += 1 + int64(g.rng.IntN(2000))
	e.Timestamp = g.ts
	g.events = append(g.events, e)
	l := lengths[e.Type]
	start := len(g.out)
	g.out = append(g.out, make([]byte, 2+l)...)
	b := g.out[start:]
	be.PutUint16(b, uint16(l))
	m := b[2:]
	m[0] = e.Type
	be.PutUint16(m[1:], e.Locate)
	be.PutUint16(m[3:], uint16(len(g.events)))
	be.PutUint16(m[5:], uint16(e.Timestamp>>32))
	be.PutUint32(m[7:], uint32(e.Timestamp))
	sym := []byte("STK" + string(rune('A'+e.Locate%26)) + "    ")
	g.match++
	switch e.Type {
	case 'A', 'F', 'P':
		be.PutUint64(m[11:], e.Ref)
		m[19] = e.Side
		be.PutUint32(m[20:], e.Shares)
		copy(m[24:32], sym)
		be.PutUint32(m[32:], e.Price)
		if e.Type == 'F' {
			copy(m[36:40], "MPID")
		}
		if e.Type == 'P' {
			be.PutUint64(m[36:], g.match)
		}
	case 'E', 'C':
		be.PutUint64(m[11:], e.Ref)
		be.PutUint32(m[19:], e.Shares)
		be.PutUint64(m[23:], g.match)
		if e.Type == 'C' {
			m[31] = e.Printable
			be.PutUint32(m[32:], e.Price)
		}
	case 'X':
		be.PutUint64(m[11:], e.Ref)
		be.PutUint32(m[19:], e.Shares)
	case 'D':
		be.PutUint64(m[11:], e.Ref)
	case 'U':
		be.PutUint64(m[11:], e.Ref)
		be.PutUint64(m[19:], e.NewRef)
		be.PutUint32(m[27:], e.Shares)
		be.PutUint32(m[31:], e.Price)
	case 'S':
		m[11] = 'O'
	case 'R', 'H', 'Y', 'K', 'J', 'h', 'N', 'O':
		copy(m[11:19], sym)
	}
}
