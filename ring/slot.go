package ring

import (
	"encoding/binary"
	"math/bits"
)

// headerCheck binds a slot header's fields to its sequence, so a reader can
// tell a header that a correct writer finished for seq from garbage, from a
// header of another lap, or from a torn one. It is a multiply-xor mix in
// two independent lanes, each one full 64x64->128-bit multiply folded
// (high xor low word, so every input bit reaches both halves): (seq, ns)
// and (len|type|flags, publisher), each operand xored with its own odd
// constant first. The two multiplies do not wait for each other, so the
// check costs about one multiply's latency, not a chain of four (it is
// paid per tick by every writer and every reader). A lane ignores its
// other operand only if one operand equals its constant: seq or ns equal
// to lane 0's (one value in 2^64 each), or a len field of 0x9f1c45a3,
// which is never a valid length, so such a slot is corrupt anyway; lane 1's
// publisher operand cannot be zero (its constant has bits above 32). It is
// not a cryptographic MAC: it guards against accidents, not against a
// peer that means harm (such a peer could write anything anyway).
func headerCheck(seq uint64, ns int64, n uint32, typ, flags uint16, pub uint32) uint32 {
	return checkWords(seq, uint64(ns), uint64(n)|uint64(typ)<<32|uint64(flags)<<48, pub)
}

// checkWords is headerCheck of the header's words as a slot holds them:
// ns at +8, len|type<<32|flags<<48 at +16, and the publisher (the low half
// of the word at +24).
func checkWords(seq, ns, ltf uint64, pub uint32) uint32 {
	h0, l0 := bits.Mul64(seq^0xa0761d6478bd642f, ns^0xe7037ed1a0b428db)
	h1, l1 := bits.Mul64(ltf^0x8ebc6af09f1c45a3, uint64(pub)^0x589965cc75374cc3)
	h := h0 ^ l0 ^ h1 ^ l1
	return uint32(h>>32) ^ uint32(h)
}

// putBody writes the header fields after the stamp (bytes 8..31 of a slot)
// into b, which must hold SlotHeaderSize-8 bytes.
func putBody(b []byte, seq uint64, ns int64, n uint32, typ, flags uint16, pub uint32) {
	_ = b[SlotHeaderSize-offBody-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(ns))
	binary.LittleEndian.PutUint32(b[8:], n)
	binary.LittleEndian.PutUint16(b[12:], typ)
	binary.LittleEndian.PutUint16(b[14:], flags)
	binary.LittleEndian.PutUint32(b[16:], pub)
	binary.LittleEndian.PutUint32(b[20:], headerCheck(seq, ns, n, typ, flags, pub))
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
	if uint64(n) > uint64(len(slot)-SlotHeaderSize) || uint32(pc>>32) != checkWords(seq, ns, ltf, pub) {
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
	t.Payload = slot[SlotHeaderSize : SlotHeaderSize+int(n) : SlotHeaderSize+int(n)]
	return slotOK
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
