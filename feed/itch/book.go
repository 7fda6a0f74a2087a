package itch

import (
	"fmt"

	"github.com/tickbus/tickbus/tick"
)

// Pre-built errors: Apply fails without allocating; Feed adds the message's
// number and offset.
var (
	errUnknownOrder = fmt.Errorf("%w: unknown order reference", ErrBook)
	errDuplicate    = fmt.Errorf("%w: order reference already on the book", ErrBook)
	errOverExecuted = fmt.Errorf("%w: more shares executed or cancelled than the order has", ErrBook)
	errWrongStock   = fmt.Errorf("%w: stock locate differs from the order's", ErrBook)
	errSide         = fmt.Errorf("%w: side, want B or S", ErrMalformed)
	errLocate       = fmt.Errorf("%w: stock locate 0 on an order message", ErrMalformed)
	errNoShares     = fmt.Errorf("%w: 0 shares", ErrMalformed)
	errManyShares   = fmt.Errorf("%w: 2^31 shares or more in one order", ErrMalformed)
)

// MaxTicks is the most ticks one message produces: a trade, a bid, an ask.
const MaxTicks = 3

// order is one resting order in 16 bytes, four to a cache line: the side
// is the top bit of the shares (no order comes near 2^31 shares), the
// stock locate lives in a parallel array (orders.locs), and a slot whose
// qs is 0 is free (an order with no shares left is off the book).
type order struct {
	ref   uint64
	qs    uint32 // shares | sellBit
	price Price4
}

const sellBit = 1 << 31

func (o *order) shares() uint32 { return o.qs &^ sellBit }

// side is 0 for a bid, 1 for an ask.
func (o *order) side() int { return int(o.qs >> 31) }

func newOrder(ref uint64, side int, shares uint32, price Price4) order {
	return order{ref: ref, qs: shares | uint32(side)<<31, price: price}
}

// orders is an open-addressing hash table of resting orders by reference
// (linear probing, backward-shift deletion): no allocation once grown.
type orders struct {
	slots []order
	locs  []uint16 // each slot's stock locate
	mask  uint64
	n     int
}

func (t *orders) init(capPow2 int) {
	t.slots = make([]order, capPow2)
	t.locs = make([]uint16, capPow2)
	t.mask = uint64(capPow2 - 1)
	t.n = 0
}

// home is the reference's slot: the reference itself, masked. Nasdaq
// numbers orders in increasing order through the day, so the orders a
// message touches (mostly recent ones) sit close together in memory, and
// consecutive references never collide; a multiplicative hash would
// scatter them and cost a cache miss per message.
func (t *orders) home(ref uint64) uint64 { return ref & t.mask }

// find returns the slot index of ref, or -1.
func (t *orders) find(ref uint64) int {
	for i := t.home(ref); ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.qs == 0 {
			return -1
		}
		if s.ref == ref {
			return int(i)
		}
	}
}

// add inserts o (with shares) at locate unless its ref is present
// (false): one probe for both.
func (t *orders) add(o order, locate uint16) bool {
	if 2*(t.n+1) > len(t.slots) {
		if t.find(o.ref) >= 0 {
			return false
		}
		t.insert(o, locate)
		return true
	}
	i := t.home(o.ref)
	for t.slots[i].qs != 0 {
		if t.slots[i].ref == o.ref {
			return false
		}
		i = (i + 1) & t.mask
	}
	t.slots[i], t.locs[i] = o, locate
	t.n++
	return true
}

// insert adds o (with shares), whose ref must not be present.
func (t *orders) insert(o order, locate uint16) {
	if 2*(t.n+1) > len(t.slots) { // keep the load at most 1/2
		old, locs := t.slots, t.locs
		t.init(2 * len(old))
		for i := range old {
			if old[i].qs != 0 {
				t.insert(old[i], locs[i])
			}
		}
	}
	i := t.home(o.ref)
	for t.slots[i].qs != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i], t.locs[i] = o, locate
	t.n++
}

// remove deletes slot i, shifting back the entries that probed past it.
func (t *orders) remove(i int) {
	j := uint64(i)
	for {
		t.slots[j].qs = 0
		k := j
		for {
			k = (k + 1) & t.mask
			if t.slots[k].qs == 0 {
				t.n--
				return
			}
			h := t.home(t.slots[k].ref)
			// Move k into the hole at j unless its home lies cyclically in (j, k].
			if (j < k && (h <= j || h > k)) || (j > k && h <= j && h > k) {
				t.slots[j], t.locs[j] = t.slots[k], t.locs[k]
				j = k
				break
			}
		}
	}
}

func (t *orders) reset() {
	clear(t.slots) // locs need no clearing: a slot with qs 0 is free
	t.n = 0
}

// level is the total shares resting at one price. key is the price for
// bids and its complement for asks, so that on both sides the levels sort
// ascending with the best last.
type level struct {
	key    uint32
	shares uint64
}

// top is a side's best price and the shares at it (0, 0: empty).
type top struct {
	price  Price4
	shares uint64
}

type stockBook struct {
	side [2][]level // 0 bids, 1 asks
	last [2]top     // as last published
}

func sideIndex(s byte) int {
	if s == 'S' {
		return 1
	}
	return 0
}

func key(side int, p Price4) uint32 {
	if side == 1 {
		return ^uint32(p)
	}
	return uint32(p)
}

// search returns the index of k in ls, or where it would go. Most
// activity is near the top, at the end: it scans the last few levels
// first, then halves the rest.
func search(ls []level, k uint32) (int, bool) {
	hi := len(ls)
	for n := 0; n < 8 && hi > 0; n++ {
		switch c := ls[hi-1].key; {
		case c == k:
			return hi - 1, true
		case c < k:
			return hi, false
		}
		hi--
	}
	lo := 0
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ls[mid].key < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(ls) && ls[lo].key == k
}

func (sb *stockBook) add(side int, p Price4, shares uint32) {
	ls := sb.side[side]
	k := key(side, p)
	i, ok := search(ls, k)
	if ok {
		ls[i].shares += uint64(shares)
		return
	}
	ls = append(ls, level{})
	copy(ls[i+1:], ls[i:])
	ls[i] = level{key: k, shares: uint64(shares)}
	sb.side[side] = ls
}

func (sb *stockBook) sub(side int, p Price4, shares uint32) {
	ls := sb.side[side]
	i, ok := search(ls, key(side, p))
	if !ok {
		return // cannot happen: every resting order's shares are on its level
	}
	if ls[i].shares -= uint64(shares); ls[i].shares == 0 {
		copy(ls[i:], ls[i+1:])
		sb.side[side] = ls[:len(ls)-1]
	}
}

func (sb *stockBook) top(side int) top {
	ls := sb.side[side]
	if len(ls) == 0 {
		return top{}
	}
	l := ls[len(ls)-1]
	p := Price4(l.key)
	if side == 1 {
		p = Price4(^l.key)
	}
	return top{price: p, shares: l.shares}
}

// Book is a TotalView-ITCH order book for every stock, built from add,
// execute, cancel, delete and replace messages, turning each message into
// level-1 ticks. It is not safe for concurrent use; Apply allocates
// nothing once the book has grown to the day's size.
type Book struct {
	orders orders
	stocks *[1 << 16]*stockBook // by stock locate
	venue  tick.Venue
	day    int64 // ns since the Unix epoch of midnight on the file's date
}

// NewBook makes an empty book whose ticks carry venue and exchange times
// on the day that starts at midnight (ns since the Unix epoch).
func NewBook(venue tick.Venue, midnight int64) *Book {
	b := &Book{venue: venue, day: midnight, stocks: new([1 << 16]*stockBook)}
	b.orders.init(1 << 12)
	return b
}

// Reset empties the book, keeping its memory.
func (b *Book) Reset() {
	b.orders.reset()
	for _, sb := range b.stocks {
		if sb != nil {
			sb.side[0], sb.side[1] = sb.side[0][:0], sb.side[1][:0]
			sb.last = [2]top{}
		}
	}
}

// Orders is how many orders rest on the book.
func (b *Book) Orders() int { return b.orders.n }

// Best is a stock's best bid and ask now (price in tick units, shares at
// that price; zeros for an empty side).
func (b *Book) Best(locate uint16) (bidPrice int64, bidSize uint64, askPrice int64, askSize uint64) {
	sb := b.stocks[locate]
	if sb == nil {
		return
	}
	bt, at := sb.top(0), sb.top(1)
	return bt.price.Units(), bt.shares, at.price.Units(), at.shares
}

func (b *Book) stock(locate uint16) *stockBook {
	sb := b.stocks[locate]
	if sb == nil {
		sb = &stockBook{}
		b.stocks[locate] = sb
	}
	return sb
}

// Apply applies message m, the seq-th of the file (ExchSeq), and writes
// its level-1 ticks into out, which must hold MaxTicks: first the trade
// (E at the resting order's price, C at its execution price when
// printable, P at its price), then a bid if the best bid's price or total
// shares changed, then an ask if the best ask's did; an emptied side is
// price 0, size 0. The last tick has FlagLastInBatch. Messages that touch
// no book (system, directory, Q, B, ...) give no tick. A message the book
// cannot apply returns an error wrapping ErrBook or ErrMalformed and
// changes nothing.
func (b *Book) Apply(m Message, seq uint64, out []tick.Tick) (int, error) {
	_ = out[MaxTicks-1]
	var (
		n       int
		locate  = m.Locate()
		sb      *stockBook
		touched = -1 // the side whose best may have moved
	)
	switch m[0] {
	case TypeAddOrder, TypeAddOrderMPID:
		ref, side, shares, price := be.Uint64(m[11:]), m[19], be.Uint32(m[20:]), p4(m[32:])
		if locate == 0 {
			return 0, errLocate
		}
		if side != 'B' && side != 'S' {
			return 0, errSide
		}
		if shares == 0 {
			return 0, errNoShares
		}
		if shares&sellBit != 0 {
			return 0, errManyShares
		}
		if !b.orders.add(newOrder(ref, sideIndex(side), shares, price), locate) {
			return 0, errDuplicate
		}
		sb, touched = b.stock(locate), sideIndex(side)
		sb.add(touched, price, shares)
	case TypeOrderExecuted, TypeOrderExecutedPrice, TypeOrderCancel:
		i := b.orders.find(be.Uint64(m[11:]))
		if i < 0 {
			return 0, errUnknownOrder
		}
		o := &b.orders.slots[i]
		if b.orders.locs[i] != locate {
			return 0, errWrongStock
		}
		shares := be.Uint32(m[19:])
		if shares == 0 {
			return 0, errNoShares
		}
		if shares > o.shares() {
			return 0, errOverExecuted
		}
		switch {
		case m[0] == TypeOrderExecuted:
			out[0] = tick.Tick{Kind: tick.Trade, Price: o.price.Units(), Size: uint64(shares)}
			n = 1
		case m[0] == TypeOrderExecutedPrice && m[31] == 'Y':
			out[0] = tick.Tick{Kind: tick.Trade, Price: p4(m[32:]).Units(), Size: uint64(shares)}
			n = 1
		}
		sb, touched = b.stocks[locate], o.side()
		sb.sub(touched, o.price, shares)
		if o.qs -= shares; o.shares() == 0 { // shares <= o.shares(): the side bit stays
			b.orders.remove(i)
		}
	case TypeOrderDelete:
		i := b.orders.find(be.Uint64(m[11:]))
		if i < 0 {
			return 0, errUnknownOrder
		}
		o := b.orders.slots[i]
		if b.orders.locs[i] != locate {
			return 0, errWrongStock
		}
		sb, touched = b.stocks[locate], o.side()
		sb.sub(touched, o.price, o.shares())
		b.orders.remove(i)
	case TypeOrderReplace:
		oldRef, newRef, shares, price := be.Uint64(m[11:]), be.Uint64(m[19:]), be.Uint32(m[27:]), p4(m[31:])
		if shares == 0 {
			return 0, errNoShares
		}
		if shares&sellBit != 0 {
			return 0, errManyShares
		}
		i := b.orders.find(oldRef)
		if i < 0 {
			return 0, errUnknownOrder
		}
		o := b.orders.slots[i]
		if b.orders.locs[i] != locate {
			return 0, errWrongStock
		}
		if newRef != oldRef && b.orders.find(newRef) >= 0 {
			return 0, errDuplicate
		}
		sb, touched = b.stocks[locate], o.side()
		sb.sub(touched, o.price, o.shares())
		b.orders.remove(i)
		b.orders.insert(newOrder(newRef, touched, shares, price), locate)
		sb.add(touched, price, shares)
	case TypeTrade:
		if locate == 0 {
			return 0, errLocate
		}
		out[0] = tick.Tick{Kind: tick.Trade, Price: p4(m[32:]).Units(), Size: uint64(be.Uint32(m[20:]))}
		n = 1 // a trade against a hidden order leaves the book as it was
	default:
		return 0, nil
	}
	// Only the side of the order the message touched can have moved.
	if touched >= 0 {
		if t := sb.top(touched); t != sb.last[touched] {
			sb.last[touched] = t
			out[n] = tick.Tick{Kind: tick.Bid + tick.Kind(touched), Price: t.price.Units(), Size: t.shares}
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	exch := b.day + m.Timestamp()
	for i := 0; i < n; i++ {
		t := &out[i]
		t.Instrument, t.Venue, t.ExchTime, t.ExchSeq = uint64(locate), b.venue, exch, seq
	}
	out[n-1].Flags = tick.FlagLastInBatch
	return n, nil
}
