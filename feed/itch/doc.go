// Package itch reads Nasdaq TotalView-ITCH 5.0 files and turns them into
// level-1 ticks.
//
// A file is a sequence of messages, each preceded by its length as 2 bytes
// big-endian. Reader returns them one by one as a Message view and checks
// each length against its type (all 23 types of the 5.0 specification,
// Lengths); typed decoders (AddOrder, StockDirectory, NOII, ...) read the
// big-endian fields, 6-byte timestamps (ns since midnight, America/New_York)
// and Price(4) fields (four implied decimals). A truncated or malformed
// message is an *Error naming its 1-based number and the byte offset of its
// length prefix; the Reader stops there.
//
// Book keeps every stock's orders from A, F, E, C, X, D and U and turns
// each message (and P) into ticks: the trade first (E at the resting
// order's price, C at its own price when printable, P), then a bid tick if
// the best bid's price or total shares changed, then an ask tick likewise;
// an emptied side is price 0 and size 0; the last tick of a message has
// tick.FlagLastInBatch. Feed joins the two: a feed.Source for the
// publisher. Reader, Book and Feed allocate nothing per message once the
// book has grown (BenchmarkReplay).
package itch
