package ring

import "encoding/binary"

// headerCheck binds a slot header's fields to its sequence, so a reader can
// tell a header that a correct writer finished for seq from garbage, from a
// header of another lap, or from a torn one. It is a 64-bit multiply-xor mix,
// not a cryptographic MAC: it guards against accidents, not against a peer
// that means harm (such a peer could write anything anyway).
func headerCheck(seq uint64, ns int64, n uint32, typ, flags uint16, pub uint32) uint32 {
	h := seq*0x9e3779b97f4a7c15 ^ uint64(ns)
	h = (h ^ h>>29) * 0xbf58476d1ce4e5b9
	h ^= uint64(n)<<32 | uint64(typ)<<16 | uint64(flags)
	h = (h ^ h>>31) * 0x94d049bb133111eb
	h ^= uint64(pub)
	h = (h ^ h>>32) * 0xff51afd7ed558ccd
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
	ns := int64(binary.LittleEndian.Uint64(slot[8:]))
	n := binary.LittleEndian.Uint32(slot[16:])
	typ := binary.LittleEndian.Uint16(slot[20:])
	flags := binary.LittleEndian.Uint16(slot[22:])
	pub := binary.LittleEndian.Uint32(slot[24:])
	check := binary.LittleEndian.Uint32(slot[28:])
	if uint64(n) > uint64(len(slot)-SlotHeaderSize) || check != headerCheck(seq, ns, n, typ, flags, pub) {
		return slotCorrupt
	}
	if flags&FlagSkip != 0 && n != 8 {
		return slotCorrupt
	}
	t.Seq = seq
	t.PublishNs = ns
	t.Type = typ
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
