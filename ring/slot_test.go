package ring

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encodeSlot(size int, seq uint64, typ, flags uint16, payload []byte) []byte {
	b := make([]byte, size)
	binary.LittleEndian.PutUint64(b, seq)
	putBody(b[offBody:], seq, 77, uint32(len(payload)), typ, flags, 5, payload)
	copy(b[SlotHeaderSize:], payload)
	return b
}

func TestDecodeSlot_AcceptsWhatTheWriterWrites(t *testing.T) {
	b := encodeSlot(128, 42, 7, 0x0100, []byte("hello"))
	var tk Tick
	require.Equal(t, slotOK, decodeSlot(b, 42, &tk))
	assert.Equal(t, Tick{Seq: 42, PublishNs: 77, Type: 7, Flags: 0x0100, Publisher: 5, Payload: []byte("hello")}, tk)
	assert.Equal(t, 5, cap(tk.Payload), "a view cannot be appended into the next slot")
}

func TestDecodeSlot_RejectsGarbage(t *testing.T) {
	var tk Tick
	good := encodeSlot(128, 42, 7, 0, []byte("hello"))
	assert.Equal(t, slotCorrupt, decodeSlot(good, 43, &tk), "header of another lap")
	b := append([]byte{}, good...)
	b[SlotHeaderSize-1] ^= 1
	assert.Equal(t, slotCorrupt, decodeSlot(b, 42, &tk), "bad check")
	b = append([]byte{}, good...)
	binary.LittleEndian.PutUint32(b[16:], 200)
	assert.Equal(t, slotCorrupt, decodeSlot(b, 42, &tk), "len past the slot")
	assert.Equal(t, slotCorrupt, decodeSlot(good[:20], 42, &tk), "short slot")
	long := encodeSlot(64, 42, 0, 0, make([]byte, 32))
	assert.Equal(t, slotOK, decodeSlot(long, 42, &tk))
	assert.Equal(t, slotCorrupt, decodeSlot(long[:63], 42, &tk), "len one past a shorter slot")
	skip := encodeSlot(64, 9, 0, FlagSkip, []byte{1, 2, 3})
	assert.Equal(t, slotCorrupt, decodeSlot(skip, 9, &tk), "skip slot must carry 8 bytes")
}

// FuzzDecodeSlot: a reader decoding a slot other processes wrote must never
// panic, never hand out a payload past the slot, and accept only headers
// whose check binds them to the sequence.
func FuzzDecodeSlot(f *testing.F) {
	f.Add(encodeSlot(64, 1, 0, 0, []byte("x")), uint64(1))
	f.Add(encodeSlot(128, 99, 3, FlagSkip, binary.LittleEndian.AppendUint64(nil, 120)), uint64(99))
	f.Add(make([]byte, 64), uint64(0))
	f.Fuzz(func(t *testing.T, slot []byte, seq uint64) {
		var tk Tick
		st := decodeSlot(slot, seq, &tk)
		if st != slotOK {
			return
		}
		if len(tk.Payload) > len(slot)-SlotHeaderSize {
			t.Fatalf("payload of %d bytes from a slot of %d", len(tk.Payload), len(slot))
		}
		n := binary.LittleEndian.Uint32(slot[16:])
		if headerCheck(seq, tk.PublishNs, n, tk.Type, tk.Flags, tk.Publisher, tk.Payload) != binary.LittleEndian.Uint32(slot[28:]) {
			t.Fatal("accepted a header whose check does not match")
		}
		if tk.Flags&FlagSkip != 0 {
			if to := skipTo(&tk); to != 0 && (to < seq || to-seq >= MaxSkip) {
				t.Fatalf("skip range %d..%d accepted", seq, to)
			}
		}
	})
}

// fuzzHandler checks what a reader hands out of a ring full of arbitrary
// bytes: sequences contiguous, payloads inside their slot.
type fuzzHandler struct {
	t      *testing.T
	expect uint64
	max    int
	// slots, if set, is the ring's slots of slotSize bytes (8 of them): each
	// tick handed out must be what decodeSlot reads from its slot (poll
	// writes decodeSlot out; the two must agree).
	slots    []byte
	slotSize int
}

func (h *fuzzHandler) OnTicks(ts []Tick) {
	if len(ts) == 0 {
		h.t.Fatal("empty batch")
	}
	for _, tk := range ts {
		if tk.Seq != h.expect {
			h.t.Fatalf("tick %d, want %d", tk.Seq, h.expect)
		}
		if len(tk.Payload) > h.max {
			h.t.Fatalf("payload of %d bytes from a slot holding %d", len(tk.Payload), h.max)
		}
		if h.slots != nil {
			off := int(tk.Seq&7) * h.slotSize
			var want Tick
			if decodeSlot(h.slots[off:off+h.slotSize], tk.Seq, &want) != slotOK {
				h.t.Fatalf("tick %d delivered from a slot decodeSlot calls corrupt", tk.Seq)
			}
			if want.Seq != tk.Seq || want.PublishNs != tk.PublishNs || want.Type != tk.Type || want.Flags != tk.Flags ||
				want.Publisher != tk.Publisher || !bytes.Equal(want.Payload, tk.Payload) || cap(tk.Payload) != len(tk.Payload) {
				h.t.Fatalf("tick %+v delivered, decodeSlot reads %+v", tk, want)
			}
		}
		h.expect++
	}
}

func (h *fuzzHandler) OnEvent(ev Event) {
	if ev.From != h.expect || ev.To < ev.From {
		h.t.Fatalf("event %v, want one from %d", ev, h.expect)
	}
	h.expect = ev.To + 1
}

// FuzzReader_Poll: a ring region filled with anything (a buggy or hostile
// writer) never makes the reader panic, hand out bytes past a slot, hand
// out anything but what decodeSlot reads, or skip a sequence without an
// event; the stats add up. Slots of 64 bytes, or of 96 (wide: a lossy
// reader's inlined payload copy, and slots half way into a cache line).
func FuzzReader_Poll(f *testing.F) {
	seed := func(size int) []byte {
		good := make([]byte, 8*size)
		for s := uint64(1); s <= 8; s++ {
			copy(good[int(s&7)*size:], encodeSlot(size, s, 1, 0, []byte("abc")))
		}
		return good
	}
	good := seed(64)
	f.Add(good, uint64(1), true, false)
	f.Add(good, uint64(1), false, false)
	lapped := append([]byte{}, good...)
	binary.LittleEndian.PutUint64(lapped[64:], 9+8) // slot 1 holds seq 17
	f.Add(lapped, uint64(1), true, false)
	wide := seed(96)
	f.Add(wide, uint64(1), true, true)
	f.Add(wide, uint64(1), false, true)
	wide = append([]byte{}, wide...)
	copy(wide[3*96:], encodeSlot(96, 3, 1, 0, make([]byte, 64)))
	copy(wide[4*96:], encodeSlot(96, 4, 1, FlagSkip, binary.LittleEndian.AppendUint64(nil, 6)))
	f.Add(wide, uint64(1), true, true)
	f.Fuzz(func(t *testing.T, data []byte, start uint64, lossy, wide bool) {
		size := 64
		if wide {
			size = 96
		}
		mem := make([]byte, regionSize(8, size))
		copy(mem[offSlots:], data)
		mode := Reliable
		if lossy {
			mode = Lossy
		}
		start = start%1000 + 1
		cfg := RingConfig{Slots: 8, SlotSize: size, Mode: mode, Start: start, GapTimeout: -1, MaxBatch: 4}
		r := newReader(mem, &cfg)
		h := &fuzzHandler{t: t, expect: start, max: size - SlotHeaderSize, slots: mem[offSlots:], slotSize: size}
		for i := 0; i < 32; i++ {
			r.Poll(h)
		}
		st := r.Stats()
		if st.Next != r.Next() || h.expect != r.Next() {
			t.Fatalf("reader at %d, head %d, handler at %d", r.Next(), st.Next, h.expect)
		}
		if sum := st.Delivered + st.Gap + st.Overrun + st.Corrupt + st.Skip; sum != r.Next()-start {
			t.Fatalf("stats %+v add to %d, passed %d", st, sum, r.Next()-start)
		}
	})
}

// A reader lapped again and again while it catches up reports one overrun
// range, not one event per sequence.
func TestReader_Poll_CoalescesRepeatedOverruns(t *testing.T) {
	mem := make([]byte, regionSize(8, 64))
	for s := uint64(17); s <= 24; s++ { // the writer is two laps ahead
		copy(mem[offSlots+int(s&7)*64:], encodeSlot(64, s, 0, 0, []byte{byte(s)}))
	}
	cfg := RingConfig{Slots: 8, SlotSize: 64, Mode: Lossy, Start: 1, GapTimeout: -1, MaxBatch: 64}
	r := newReader(mem, &cfg)
	var c collector
	for i := 0; i < 4; i++ {
		r.Poll(&c)
	}
	require.Equal(t, []Event{{Kind: EventOverrun, From: 1, To: 16}}, c.events)
	require.Len(t, c.ticks, 8)
	assert.Equal(t, uint64(17), c.ticks[0].Seq)
	assert.Equal(t, uint64(25), r.Next())
}

// headerCheck's properties the reader relies on, over many random headers
// (a fixed seed, so the test is the same every run): a header of another
// lap (seq ± k·slots, every ring size), any single bit flipped in any
// field, and a torn header (words of two ticks mixed) all fail the check.
func TestHeaderCheck_CatchesOtherLapsFlippedBitsAndTornHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type hdr struct {
		seq, ns    uint64
		n          uint32
		typ, flags uint16
		pub        uint32
	}
	check := func(h hdr) uint32 { return headerCheck(h.seq, int64(h.ns), h.n, h.typ, h.flags, h.pub, nil) }
	random := func() hdr {
		return hdr{seq: rng.Uint64N(1 << 40), ns: rng.Uint64(), n: rng.Uint32N(MaxSlotSize), typ: uint16(rng.Uint32()),
			flags: uint16(rng.Uint32()), pub: rng.Uint32()}
	}
	misses := 0
	for i := 0; i < 2000; i++ {
		h := random()
		if i%4 == 0 { // small, typical values too: the first sequences, a tick's length, publisher 1
			h.seq, h.n, h.typ, h.flags, h.pub = uint64(i/4+1), 56, 1, 0, 1
		}
		c := check(h)
		for sh := 0; sh <= 24; sh++ { // other laps: rings of 1 .. MaxSlots slots
			for k := uint64(1); k <= 3; k++ {
				o := h
				o.seq += k << sh
				if check(o) == c {
					misses++
					t.Errorf("seq %d and %d (lap %d of %d slots) share check %#x", h.seq, o.seq, k, 1<<sh, c)
				}
			}
		}
		for b := 0; b < 64; b++ {
			for _, o := range []hdr{
				{h.seq ^ 1<<b, h.ns, h.n, h.typ, h.flags, h.pub},
				{h.seq, h.ns ^ 1<<b, h.n, h.typ, h.flags, h.pub},
				{h.seq, h.ns, h.n ^ uint32(1)<<(b%32), h.typ, h.flags, h.pub},
				{h.seq, h.ns, h.n, h.typ ^ uint16(1)<<(b%16), h.flags, h.pub},
				{h.seq, h.ns, h.n, h.typ, h.flags ^ uint16(1)<<(b%16), h.pub},
				{h.seq, h.ns, h.n, h.typ, h.flags, h.pub ^ uint32(1)<<(b%32)},
			} {
				if check(o) == c {
					misses++
					t.Errorf("%+v and %+v (one bit apart) share check %#x", h, o, c)
				}
			}
		}
		// Torn: the writer of o (the same slot, a later lap) stored some of
		// its header words over h's; each mix must fail both checks.
		o := random()
		o.seq = h.seq + 1<<rng.IntN(25)
		for _, m := range []hdr{
			{h.seq, o.ns, h.n, h.typ, h.flags, h.pub},
			{h.seq, h.ns, o.n, o.typ, o.flags, h.pub},
			{h.seq, h.ns, h.n, h.typ, h.flags, o.pub},
			{h.seq, o.ns, o.n, o.typ, o.flags, h.pub},
		} {
			if check(m) == c || check(m) == check(o) {
				misses++
				t.Errorf("torn header %+v passes as %+v or %+v", m, h, o)
			}
		}
		if misses > 10 {
			t.FailNow()
		}
	}
}

// checkWords is headerCheck of the words a slot holds, as decodeSlot loads
// them: both sides of the check compute the same thing.
func TestCheckWords_IsHeaderCheckOfTheSlotWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		seq, ns, n, typ, flags, pub := rng.Uint64(), int64(rng.Uint64()), rng.Uint32(), uint16(rng.Uint32()), uint16(rng.Uint32()), rng.Uint32()
		b := make([]byte, SlotHeaderSize)
		p := make([]byte, rng.IntN(200))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		putBody(b[offBody:], seq, ns, n, typ, flags, pub, p)
		le := binary.LittleEndian
		require.Equal(t, headerCheck(seq, ns, n, typ, flags, pub, p), checkWords(seq, le.Uint64(b[8:]), le.Uint64(b[16:]), uint32(le.Uint64(b[24:])), payloadSum(p)))
		require.Equal(t, headerCheck(seq, ns, n, typ, flags, pub, p), le.Uint32(b[28:]))
	}
}

// copyPayload hands out exactly the payload, capped at its length, for
// every length a slot holds, on its inlined path (slots of 96 bytes and
// more, payloads up to 64) and on copy's.
func TestCopyPayload_EveryLength_ExactlyThePayload(t *testing.T) {
	for _, size := range []int{64, 96, 128, 160} {
		for n := 0; n <= size-SlotHeaderSize; n++ {
			pl := make([]byte, n)
			for i := range pl {
				pl[i] = byte(n*7 + i + 1)
			}
			s := encodeSlot(size, 3, 1, 0, pl)
			for i := SlotHeaderSize + n; i < size; i++ {
				s[i] = 0xee // what lies past the payload is never handed out
			}
			dst := make([]byte, size)
			got := copyPayload(dst, s, s[SlotHeaderSize:SlotHeaderSize+n])
			require.Equal(t, pl, got, "slot %d, %d bytes", size, n)
			require.Equal(t, n, cap(got), "slot %d, %d bytes", size, n)
		}
	}
}
