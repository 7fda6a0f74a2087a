package itch

import "encoding/binary"

var be = binary.BigEndian

// Message types of TotalView-ITCH 5.0, the first byte of every message.
const (
	TypeSystemEvent          = 'S'
	TypeStockDirectory       = 'R'
	TypeStockTradingAction   = 'H'
	TypeRegSHORestriction    = 'Y'
	TypeParticipantPosition  = 'L'
	TypeMWCBDeclineLevel     = 'V'
	TypeMWCBStatus           = 'W'
	TypeIPOQuotingPeriod     = 'K'
	TypeLULDAuctionCollar    = 'J'
	TypeOperationalHalt      = 'h'
	TypeAddOrder             = 'A'
	TypeAddOrderMPID         = 'F'
	TypeOrderExecuted        = 'E'
	TypeOrderExecutedPrice   = 'C'
	TypeOrderCancel          = 'X'
	TypeOrderDelete          = 'D'
	TypeOrderReplace         = 'U'
	TypeTrade                = 'P'
	TypeCrossTrade           = 'Q'
	TypeBrokenTrade          = 'B'
	TypeNOII                 = 'I'
	TypeRPII                 = 'N'
	TypeDirectListingCapital = 'O'
)

// Lengths is every message type's length in bytes, the type byte included
// (the 2-byte length prefix excluded); 0 for a byte that is no type.
var Lengths = [256]uint8{
	TypeSystemEvent:          12,
	TypeStockDirectory:       39,
	TypeStockTradingAction:   25,
	TypeRegSHORestriction:    20,
	TypeParticipantPosition:  26,
	TypeMWCBDeclineLevel:     35,
	TypeMWCBStatus:           12,
	TypeIPOQuotingPeriod:     28,
	TypeLULDAuctionCollar:    35,
	TypeOperationalHalt:      21,
	TypeAddOrder:             36,
	TypeAddOrderMPID:         40,
	TypeOrderExecuted:        31,
	TypeOrderExecutedPrice:   36,
	TypeOrderCancel:          23,
	TypeOrderDelete:          19,
	TypeOrderReplace:         35,
	TypeTrade:                44,
	TypeCrossTrade:           40,
	TypeBrokenTrade:          19,
	TypeNOII:                 50,
	TypeRPII:                 20,
	TypeDirectListingCapital: 48,
}

// Every message starts with the same 11 bytes:
//
//	offset 0  type             1 byte, ASCII
//	offset 1  stock locate     2 bytes (0 for messages about no stock)
//	offset 3  tracking number  2 bytes
//	offset 5  timestamp        6 bytes, ns since midnight
//	offset 11 the type's fields, big-endian
const headerLen = 11

// Message is one message's bytes, its length checked against its type by
// the Reader. A Message from a Reader is valid until the Reader's next
// call. Its accessors allocate nothing; each typed decoder (AddOrder,
// StockDirectory, ...) reads the fields of one type and must be called
// only on a message of that type.
type Message []byte

// Type is the message type byte.
func (m Message) Type() byte { return m[0] }

// Locate is the stock locate code (0 for system-wide messages).
func (m Message) Locate() uint16 { return be.Uint16(m[1:]) }

// Tracking is the Nasdaq internal tracking number.
func (m Message) Tracking() uint16 { return be.Uint16(m[3:]) }

// Timestamp is nanoseconds since midnight (6 bytes).
func (m Message) Timestamp() int64 { return int64(u48(m[5:])) }

func u48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}

// Stock is an 8-byte, space-padded symbol.
type Stock [8]byte

func (s Stock) String() string {
	n := len(s)
	for n > 0 && s[n-1] == ' ' {
		n--
	}
	return string(s[:n])
}

func stock(b []byte) (s Stock) { copy(s[:], b[:8]); return s }

// Price4 is a Price(4) field: an integer with four implied decimals.
type Price4 uint32

// Units is the price in tick.PriceScale units (1e-8).
func (p Price4) Units() int64 { return int64(p) * 10_000 }

// Price8 is a Price(8) field: eight implied decimals, tick's own scale.
type Price8 uint64

// Units is the price in tick.PriceScale units (1e-8).
func (p Price8) Units() int64 { return int64(p) }

func p4(b []byte) Price4 { return Price4(be.Uint32(b)) }

// SystemEvent ('S').
type SystemEvent struct {
	EventCode byte // O, S, Q, M, E, C
}

// SystemEvent decodes an 'S' message.
func (m Message) SystemEvent() SystemEvent { return SystemEvent{EventCode: m[11]} }

// StockDirectory ('R').
type StockDirectory struct {
	Stock                       Stock
	MarketCategory              byte
	FinancialStatus             byte
	RoundLotSize                uint32
	RoundLotsOnly               byte
	IssueClassification         byte
	IssueSubType                [2]byte
	Authenticity                byte
	ShortSaleThresholdIndicator byte
	IPOFlag                     byte
	LULDReferencePriceTier      byte
	ETPFlag                     byte
	ETPLeverageFactor           uint32
	InverseIndicator            byte
}

// StockDirectory decodes an 'R' message.
func (m Message) StockDirectory() StockDirectory {
	return StockDirectory{
		Stock: stock(m[11:]), MarketCategory: m[19], FinancialStatus: m[20], RoundLotSize: be.Uint32(m[21:]),
		RoundLotsOnly: m[25], IssueClassification: m[26], IssueSubType: [2]byte{m[27], m[28]}, Authenticity: m[29],
		ShortSaleThresholdIndicator: m[30], IPOFlag: m[31], LULDReferencePriceTier: m[32], ETPFlag: m[33],
		ETPLeverageFactor: be.Uint32(m[34:]), InverseIndicator: m[38],
	}
}

// StockTradingAction ('H').
type StockTradingAction struct {
	Stock        Stock
	TradingState byte // H, P, Q, T
	Reserved     byte
	Reason       [4]byte
}

// StockTradingAction decodes an 'H' message.
func (m Message) StockTradingAction() StockTradingAction {
	return StockTradingAction{Stock: stock(m[11:]), TradingState: m[19], Reserved: m[20], Reason: [4]byte(m[21:25])}
}

// RegSHORestriction ('Y').
type RegSHORestriction struct {
	Stock  Stock
	Action byte // 0, 1, 2
}

// RegSHORestriction decodes a 'Y' message.
func (m Message) RegSHORestriction() RegSHORestriction {
	return RegSHORestriction{Stock: stock(m[11:]), Action: m[19]}
}

// ParticipantPosition ('L', market participant position).
type ParticipantPosition struct {
	MPID                [4]byte
	Stock               Stock
	PrimaryMarketMaker  byte
	MarketMakerMode     byte
	MarketParticipState byte
}

// ParticipantPosition decodes an 'L' message.
func (m Message) ParticipantPosition() ParticipantPosition {
	return ParticipantPosition{MPID: [4]byte(m[11:15]), Stock: stock(m[15:]), PrimaryMarketMaker: m[23],
		MarketMakerMode: m[24], MarketParticipState: m[25]}
}

// MWCBDeclineLevel ('V'): market-wide circuit breaker levels, Price(8).
type MWCBDeclineLevel struct {
	Level1, Level2, Level3 Price8
}

// MWCBDeclineLevel decodes a 'V' message.
func (m Message) MWCBDeclineLevel() MWCBDeclineLevel {
	return MWCBDeclineLevel{Level1: Price8(be.Uint64(m[11:])), Level2: Price8(be.Uint64(m[19:])), Level3: Price8(be.Uint64(m[27:]))}
}

// MWCBStatus ('W').
type MWCBStatus struct {
	BreachedLevel byte // 1, 2, 3
}

// MWCBStatus decodes a 'W' message.
func (m Message) MWCBStatus() MWCBStatus { return MWCBStatus{BreachedLevel: m[11]} }

// IPOQuotingPeriod ('K', IPO quoting period update).
type IPOQuotingPeriod struct {
	Stock            Stock
	ReleaseTime      uint32 // seconds since midnight
	ReleaseQualifier byte   // A, C
	IPOPrice         Price4
}

// IPOQuotingPeriod decodes a 'K' message.
func (m Message) IPOQuotingPeriod() IPOQuotingPeriod {
	return IPOQuotingPeriod{Stock: stock(m[11:]), ReleaseTime: be.Uint32(m[19:]), ReleaseQualifier: m[23], IPOPrice: p4(m[24:])}
}

// LULDAuctionCollar ('J').
type LULDAuctionCollar struct {
	Stock                        Stock
	ReferencePrice, Upper, Lower Price4
	Extension                    uint32
}

// LULDAuctionCollar decodes a 'J' message.
func (m Message) LULDAuctionCollar() LULDAuctionCollar {
	return LULDAuctionCollar{Stock: stock(m[11:]), ReferencePrice: p4(m[19:]), Upper: p4(m[23:]), Lower: p4(m[27:]),
		Extension: be.Uint32(m[31:])}
}

// OperationalHalt ('h').
type OperationalHalt struct {
	Stock      Stock
	MarketCode byte // Q, B, X
	Action     byte // H, T
}

// OperationalHalt decodes an 'h' message.
func (m Message) OperationalHalt() OperationalHalt {
	return OperationalHalt{Stock: stock(m[11:]), MarketCode: m[19], Action: m[20]}
}

// AddOrder ('A', and 'F' with Attribution).
type AddOrder struct {
	Ref         uint64
	Side        byte // B or S
	Shares      uint32
	Stock       Stock
	Price       Price4
	Attribution [4]byte // 'F' only
}

// AddOrder decodes an 'A' or 'F' message.
func (m Message) AddOrder() AddOrder {
	a := AddOrder{Ref: be.Uint64(m[11:]), Side: m[19], Shares: be.Uint32(m[20:]), Stock: stock(m[24:]), Price: p4(m[32:])}
	if m[0] == TypeAddOrderMPID {
		a.Attribution = [4]byte(m[36:40])
	}
	return a
}

// OrderExecuted ('E', and 'C' with Printable and Price).
type OrderExecuted struct {
	Ref       uint64
	Shares    uint32
	Match     uint64
	Printable byte   // 'C' only: Y or N
	Price     Price4 // 'C' only
}

// OrderExecuted decodes an 'E' or 'C' message.
func (m Message) OrderExecuted() OrderExecuted {
	e := OrderExecuted{Ref: be.Uint64(m[11:]), Shares: be.Uint32(m[19:]), Match: be.Uint64(m[23:])}
	if m[0] == TypeOrderExecutedPrice {
		e.Printable, e.Price = m[31], p4(m[32:])
	}
	return e
}

// OrderCancel ('X'): a partial cancel.
type OrderCancel struct {
	Ref    uint64
	Shares uint32
}

// OrderCancel decodes an 'X' message.
func (m Message) OrderCancel() OrderCancel {
	return OrderCancel{Ref: be.Uint64(m[11:]), Shares: be.Uint32(m[19:])}
}

// OrderDelete ('D').
type OrderDelete struct{ Ref uint64 }

// OrderDelete decodes a 'D' message.
func (m Message) OrderDelete() OrderDelete { return OrderDelete{Ref: be.Uint64(m[11:])} }

// OrderReplace ('U').
type OrderReplace struct {
	OldRef, NewRef uint64
	Shares         uint32
	Price          Price4
}

// OrderReplace decodes a 'U' message.
func (m Message) OrderReplace() OrderReplace {
	return OrderReplace{OldRef: be.Uint64(m[11:]), NewRef: be.Uint64(m[19:]), Shares: be.Uint32(m[27:]), Price: p4(m[31:])}
}

// Trade ('P'): a match against a non-displayed order.
type Trade struct {
	Ref    uint64
	Side   byte
	Shares uint32
	Stock  Stock
	Price  Price4
	Match  uint64
}

// Trade decodes a 'P' message.
func (m Message) Trade() Trade {
	return Trade{Ref: be.Uint64(m[11:]), Side: m[19], Shares: be.Uint32(m[20:]), Stock: stock(m[24:]), Price: p4(m[32:]),
		Match: be.Uint64(m[36:])}
}

// CrossTrade ('Q').
type CrossTrade struct {
	Shares    uint64
	Stock     Stock
	Price     Price4
	Match     uint64
	CrossType byte // O, C, H, I
}

// CrossTrade decodes a 'Q' message.
func (m Message) CrossTrade() CrossTrade {
	return CrossTrade{Shares: be.Uint64(m[11:]), Stock: stock(m[19:]), Price: p4(m[27:]), Match: be.Uint64(m[31:]), CrossType: m[39]}
}

// BrokenTrade ('B').
type BrokenTrade struct{ Match uint64 }

// BrokenTrade decodes a 'B' message.
func (m Message) BrokenTrade() BrokenTrade { return BrokenTrade{Match: be.Uint64(m[11:])} }

// NOII ('I', net order imbalance indicator).
type NOII struct {
	PairedShares, ImbalanceShares uint64
	Direction                     byte // B, S, N, O
	Stock                         Stock
	FarPrice, NearPrice, RefPrice Price4
	CrossType                     byte
	PriceVariation                byte
}

// NOII decodes an 'I' message.
func (m Message) NOII() NOII {
	return NOII{PairedShares: be.Uint64(m[11:]), ImbalanceShares: be.Uint64(m[19:]), Direction: m[27], Stock: stock(m[28:]),
		FarPrice: p4(m[36:]), NearPrice: p4(m[40:]), RefPrice: p4(m[44:]), CrossType: m[48], PriceVariation: m[49]}
}

// RPII ('N', retail price improvement indicator).
type RPII struct {
	Stock    Stock
	Interest byte // B, S, A, N
}

// RPII decodes an 'N' message.
func (m Message) RPII() RPII { return RPII{Stock: stock(m[11:]), Interest: m[19]} }

// DirectListingCapital ('O', direct listing with capital raise price
// discovery).
type DirectListingCapital struct {
	Stock                         Stock
	OpenEligibility               byte // N, Y
	MinPrice, MaxPrice, NearPrice Price4
	NearTime                      uint64
	LowerCollar, UpperCollar      Price4
}

// DirectListingCapital decodes an 'O' message.
func (m Message) DirectListingCapital() DirectListingCapital {
	return DirectListingCapital{Stock: stock(m[11:]), OpenEligibility: m[19], MinPrice: p4(m[20:]), MaxPrice: p4(m[24:]),
		NearPrice: p4(m[28:]), NearTime: be.Uint64(m[32:]), LowerCollar: p4(m[40:]), UpperCollar: p4(m[44:])}
}
