package ring

import (
	"encoding/binary"
	"math/bits"
)

// headerCheck binds a slot's header fields and its payload to its
// sequence, so a reader can tell a tick that a correct writer finished
// for seq from garbage, from a header of another lap, or from a torn one:
// a header or a payload of which some bytes are one writer's and some
// another's. It is a multiply-xor mix in two independent lanes, each one
// full 64x64->128-bit multiply folded (high xor low word, so every input
// bit reaches both halves): (seq, ns) and (len|type|flags, publisher),
// each operand xored with its own odd constant first, the two xored with
// payloadSum. The multiplies do not wait for each other, so the header's
// part costs about one multiply's latency, not a chain of four (it is
// paid per tick by every writer and every reader). A lane ignores its
// other operand only if one operand equals its constant: seq or ns equal
// to lane 0's (one value in 2^64 each), or a len field of 0x9f1c45a3,
// which is never a valid length, so such a slot is corrupt anyway; lane 1's
// publisher operand cannot be zero (its constant has bits above 32). It is
// not a cryptographic MAC: it guards against accidents, not against a
// peer that means harm (such a peer could write anything anyway).
//
// Why the payload too: a lossy slot's seqlock (StampBusy, body, stamp)
// holds against one writer at a time, not against two. A publisher whose
// writes lag a whole ring behind another's (a deep tcp send queue, a
// thread descheduled mid-write) lands its frame for the older lap in a
// slot the newer lap has already stamped; the newer stamp stays while the
// older payload's bytes arrive, and the reader's second load of the stamp
// cannot see them. The header alone was checked before layout version 3,
// and a chaos run delivered such a tick: the newer lap's header over
// bytes of both payloads. With the payload in the check, that slot is an
// EventCorrupt for its sequence: lost, and named.
func headerCheck(seq uint64, ns int64, n uint32, typ, flags uint16, pub uint32, payload []byte) uint32 {
	return checkWords(seq, uint64(ns), uint64(n)|uint64(typ)<<32|uint64(flags)<<48, pub, payloadSum(payload))
}

// checkWords is headerCheck of the header's words as a slot holds them:
// ns at +8, len|type<<32|flags<<48 at +16, and the publisher (the low half
// of the word at +24), and of the payload's payloadSum.
func checkWords(seq, ns, ltf uint64, pub uint32, sum uint64) uint32 {
	h0, l0 := bits.Mul64(seq^0xa0761d6478bd642f, ns^0xe7037ed1a0b428db)
	h1, l1 := bits.Mul64(ltf^0x8ebc6af09f1c45a3, uint64(pub)^0x589965cc75374cc3)
	h := h0 ^ l0 ^ h1 ^ l1 ^ sum
	return uint32(h>>32) ^ uint32(h)
}

// payloadSum folds a payload into one word for headerCheck: per 16 bytes
// one folded 64x64->128-bit multiply of its two words, each xored with
// its own odd constant (the first also with the block's offset, so equal
// blocks at two offsets do not cancel), the products xored together in
// two lanes (32 bytes a round); a last partial block is the payload's
// last 16 bytes (or its bytes, zero padded, when it is shorter), marked
// with the payload's length. The multiplies do not wait for each other: a
// 64-byte payload is four a CPU overlaps (BenchmarkPayloadSum). An empty
// payload sums to 0.
func payloadSum(p []byte) uint64 {
	const k0, k1, k2, k3 = 0xd6e8feb86659fd93, 0xca9b0c3e3f5d5a6f, 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9
	le := binary.LittleEndian
	var s0, s1 uint64
	n, i := len(p), 0
	for ; i+32 <= n; i += 32 {
		q := p[i : i+32 : i+32]
		h0, l0 := bits.Mul64(le.Uint64(q[0:8])^k0^uint64(i), le.Uint64(q[8:16])^k1)
		h1, l1 := bits.Mul64(le.Uint64(q[16:24])^k0^uint64(i+16), le.Uint64(q[24:32])^k1)
		s0 ^= h0 ^ l0
		s1 ^= h1 ^ l1
	}
	if i+16 <= n {
		q := p[i : i+16 : i+16]
		h0, l0 := bits.Mul64(le.Uint64(q[0:8])^k0^uint64(i), le.Uint64(q[8:16])^k1)
		s0 ^= h0 ^ l0
		i += 16
	}
	if i == n {
		return s0 ^ s1
	}
	var a, b uint64
	switch {
	case n >= 16:
		a, b = le.Uint64(p[n-16:]), le.Uint64(p[n-8:])
	case n >= 8:
		a, b = le.Uint64(p[:8]), le.Uint64(p[n-8:])
	default:
		for j := n - 1; j >= 0; j-- {
			a = a<<8 | uint64(p[j])
		}
	}
	h, l := bits.Mul64(a^k2^uint64(n), b^k3)
	return s0 ^ s1 ^ h ^ l
}

// putBody writes the header fields after the stamp (bytes 8..31 of a slot)
// into b, which must hold SlotHeaderSize-8 bytes.
func putBody(b []byte, seq uint64, ns int64, n uint32, typ, flags uint16, pub uint32, payload []byte) {
	_ = b[SlotHeaderSize-offBody-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(ns))
	binary.LittleEndian.PutUint32(b[8:], n)
	binary.LittleEndian.PutUint16(b[12:], typ)
	binary.LittleEndian.PutUint16(b[14:], flags)
	binary.LittleEndian.PutUint32(b[16:], pub)
	binary.LittleEndian.PutUint32(b[20:], headerCheck(seq, ns, n, typ, flags, pub, payload))
}

// slotStatus is what decodeSlot found.
type slotStatus uint8

const (
	slotOK      slotStatus = iota // a complete tick for seq
	slotCorrupt                   // stamp says seq, header does not
)

// decodeSlot reads the tick of seq from slot, a copy of (or a view on) one
// whole slot whose stamp the caller found equal to seq. It never reads past
// slot and never trusts a length it has not checked. slot comes from memory
// other processes write, so anything is possible.
func decodeSlot(slot []byte, seq uint64, t *Tick) slotStatus {
	if len(slot) < SlotHeaderSize {
		return slotCorrupt
	}
	// The header as the three words after the stamp (slotBody's), one
	// bounds check for all three.
	w := (*[hdrLen]byte)(slot[offBody:SlotHeaderSize])
	le := binary.LittleEndian
	ns, ltf, pc := le.Uint64(w[0:]), le.Uint64(w[8:]), le.Uint64(w[16:])
	n, pub := uint32(ltf), uint32(pc)
	flags := uint16(ltf >> 48)
	if uint64(n) > uint64(len(slot)-SlotHeaderSize) {
		return slotCorrupt
	}
	p := slot[SlotHeaderSize : SlotHeaderSize+int(n) : SlotHeaderSize+int(n)]
	if uint32(pc>>32) != checkWords(seq, ns, ltf, pub, payloadSum(p)) {
		return slotCorrupt
	}
	if flags&FlagSkip != 0 && n != 8 {
		return slotCorrupt
	}
	t.Seq = seq
	t.PublishNs = int64(ns)
	t.Type = uint16(ltf >> 32)
	t.Flags = flags
	t.Publisher = pub
	t.Payload = p
	return slotOK
}

// slotWhole reports whether slot (a view on a ring's slot, which writers
// may be changing under it) holds a whole tick for seq: its header check,
// payload included, passes. Off the hot path (lapped-looking slots, the
// count at Close).
func slotWhole(slot []byte, seq uint64) bool {
	var t Tick
	return decodeSlot(slot, seq, &t) == slotOK
}

// skipTo is the last sequence a skip slot covers, or 0 if it names a
// range that does not start at seq or is absurd (more than MaxSkip).
func skipTo(t *Tick) uint64 {
	to := binary.LittleEndian.Uint64(t.Payload)
	if to < t.Seq || to-t.Seq >= MaxSkip || to == StampBusy {
		return 0
	}
	return to
}

// MaxSkip bounds the sequences one skip slot may cover: PublishAt refuses
// (ErrInvalidSequence) to jump further ahead of the counter.
const MaxSkip = 1 << 20
