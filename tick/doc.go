// Package tick is tickbus's market-data tick: a fixed 56-byte binary layout
// that a publisher writes into a ring slot's payload and a subscriber reads
// back, encoded and decoded without allocation.
//
// The bus itself (ring, bus) knows nothing of ticks: to it a tick is an
// opaque payload whose message type is MessageType. Other messages travel
// as opaque payloads of their own types, up to the ring's slot payload size.
//
// Wire form, version 1, little endian, 56 bytes:
//
//	off size field
//	  0   1  version      (1)
//	  1   1  kind         Trade, Bid, Ask
//	  2   2  flags        Flag* bits; undefined bits must be zero
//	  4   4  venue        ISO 10383 MIC, upper-case ASCII letters and digits, or all zero
//	  8   8  instrument   instrument id, > 0
//	 16   8  price        signed, in units of 1/PriceScale
//	 24   8  size         quantity, unsigned
//	 32   8  exch time    exchange timestamp, ns since the Unix epoch
//	 40   8  pub time     publish timestamp, ns since the Unix epoch (or the
//	                      intended send time of a paced feed)
//	 48   8  exch seq     the venue's own sequence number (0 if none)
//
// The offsets are kept true by compile-time checks against a Go struct of
// the same shape (layout.go). Decode checks everything: a payload of another
// length, another version, an unknown kind, an undefined flag, a malformed
// venue or a zero instrument is an error wrapping ErrMalformed, and the
// destination is left unchanged.
package tick
