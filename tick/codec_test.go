package tick

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sample() Tick {
	return Tick{
		Instrument: 42,
		Venue:      Venue{'X', 'N', 'A', 'S'},
		Kind:       Bid,
		Flags:      FlagSnapshot | FlagAuction,
		Price:      PriceFromFloat(101.25),
		Size:       300,
		ExchTime:   1_700_000_000_000_000_001,
		PubTime:    1_700_000_000_000_000_999,
		ExchSeq:    987654321,
	}
}

func TestTick_EncodeDecode_RoundTripsEveryField(t *testing.T) {
	in := sample()
	buf := make([]byte, Size)
	n, err := Encode(buf, &in)
	require.NoError(t, err)
	require.Equal(t, Size, n)

	var out Tick
	require.NoError(t, Decode(buf, &out))
	assert.Equal(t, in, out)

	v := View(buf)
	assert.Equal(t, in.Instrument, v.Instrument())
	assert.Equal(t, in.Venue, v.Venue())
	assert.Equal(t, in.Kind, v.Kind())
	assert.Equal(t, in.Flags, v.Flags())
	assert.Equal(t, in.Price, v.Price())
	assert.Equal(t, in.Size, v.Size())
	assert.Equal(t, in.ExchTime, v.ExchTime())
	assert.Equal(t, in.PubTime, v.PubTime())
	assert.Equal(t, in.ExchSeq, v.ExchSeq())
}

func TestTick_Encode_WritesTheDocumentedLayout(t *testing.T) {
	in := Tick{Instrument: 0x0102030405060708, Venue: Venue{'X', 'L', 'O', 'N'}, Kind: Trade,
		Flags: FlagOffBook, Price: -2, Size: 7, ExchTime: 9, PubTime: 10, ExchSeq: 11}
	buf := make([]byte, Size)
	_, err := Encode(buf, &in)
	require.NoError(t, err)
	want := []byte{
		1, 1, 0x10, 0, 'X', 'L', 'O', 'N',
		8, 7, 6, 5, 4, 3, 2, 1,
		0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		7, 0, 0, 0, 0, 0, 0, 0,
		9, 0, 0, 0, 0, 0, 0, 0,
		10, 0, 0, 0, 0, 0, 0, 0,
		11, 0, 0, 0, 0, 0, 0, 0,
	}
	assert.Equal(t, want, buf)
}

func TestTick_Encode_RefusesInvalidTicksAndWritesNothing(t *testing.T) {
	cases := map[string]func(*Tick){
		"zero instrument": func(t *Tick) { t.Instrument = 0 },
		"kind 0":          func(t *Tick) { t.Kind = 0 },
		"kind 4":          func(t *Tick) { t.Kind = 4 },
		"undefined flag":  func(t *Tick) { t.Flags |= 1 << 15 },
		"lower-case MIC":  func(t *Tick) { t.Venue = Venue{'x', 'n', 'a', 's'} },
		"partial MIC":     func(t *Tick) { t.Venue = Venue{'X', 0, 0, 0} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := sample()
			mutate(&in)
			buf := bytes.Repeat([]byte{0xAA}, Size)
			n, err := Encode(buf, &in)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Zero(t, n)
			assert.Equal(t, bytes.Repeat([]byte{0xAA}, Size), buf, "nothing written")
		})
	}
}

func TestTick_Encode_RefusesShortBuffer(t *testing.T) {
	in := sample()
	_, err := Encode(make([]byte, Size-1), &in)
	assert.ErrorIs(t, err, ErrShortBuffer)
}

func TestTick_Decode_RejectsMalformedAndLeavesDestinationUnchanged(t *testing.T) {
	good := make([]byte, Size)
	in := sample()
	_, err := Encode(good, &in)
	require.NoError(t, err)

	cases := map[string]func([]byte) []byte{
		"empty":          func(b []byte) []byte { return nil },
		"short":          func(b []byte) []byte { return b[:Size-1] },
		"long":           func(b []byte) []byte { return append(b, 0) },
		"version 0":      func(b []byte) []byte { b[offVersion] = 0; return b },
		"version 2":      func(b []byte) []byte { b[offVersion] = 2; return b },
		"kind 0":         func(b []byte) []byte { b[offKind] = 0; return b },
		"kind 200":       func(b []byte) []byte { b[offKind] = 200; return b },
		"undefined flag": func(b []byte) []byte { b[offFlags+1] = 0x80; return b },
		"bad venue":      func(b []byte) []byte { b[offVenue] = '!'; return b },
		"zero instr":     func(b []byte) []byte { copy(b[offInstrument:], make([]byte, 8)); return b },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			src := mutate(append([]byte(nil), good...))
			out := Tick{Instrument: 7, Kind: Ask}
			err := Decode(src, &out)
			assert.ErrorIs(t, err, ErrMalformed)
			assert.Equal(t, Tick{Instrument: 7, Kind: Ask}, out, "destination unchanged")
		})
	}
}

func TestTick_EncodeDecode_AllocateNothing(t *testing.T) {
	in := sample()
	var out Tick
	buf := make([]byte, Size)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := Encode(buf, &in); err != nil {
			panic(err)
		}
		if err := Decode(buf, &out); err != nil {
			panic(err)
		}
		in.Price++
	})
	assert.Zero(t, allocs)
	// The error paths allocate nothing either: a bad tick on the hot path
	// must not bring the GC.
	bad := Tick{}
	allocs = testing.AllocsPerRun(1000, func() {
		_, _ = Encode(buf, &bad)
		_ = Decode(buf[:3], &out)
	})
	assert.Zero(t, allocs)
}

func TestPrice_AppendPrice_FormatsScaledIntegers(t *testing.T) {
	cases := map[int64]string{
		0:                   "0.00",
		PriceFromFloat(1.5): "1.50",
		10_125_000_000:      "101.25",
		1:                   "0.00000001",
		-150_000_000:        "-1.50",
		123_456_789:         "1.23456789",
	}
	for p, want := range cases {
		assert.Equal(t, want, string(AppendPrice(nil, p)), "price %d", p)
	}
	assert.Equal(t, int64(-10_125_000_000), PriceFromFloat(-101.25))
	assert.InDelta(t, 101.25, PriceFloat(10_125_000_000), 1e-12)
}

func TestVenue_Parse_AcceptsMICsAndRejectsTheRest(t *testing.T) {
	v, err := ParseVenue("XNAS")
	require.NoError(t, err)
	assert.Equal(t, "XNAS", v.String())
	v, err = ParseVenue("")
	require.NoError(t, err)
	assert.Equal(t, "-", v.String())
	for _, bad := range []string{"XNA", "XNASX", "xnas", "X-AS"} {
		_, err := ParseVenue(bad)
		assert.ErrorIs(t, err, ErrInvalid, bad)
		assert.Contains(t, err.Error(), bad)
	}
}

func TestKind_String_NamesEveryKind(t *testing.T) {
	assert.Equal(t, "trade", Trade.String())
	assert.Equal(t, "bid", Bid.String())
	assert.Equal(t, "ask", Ask.String())
	assert.Equal(t, "Kind(9)", Kind(9).String())
}

func TestTick_AppendText_ShowsTheFields(t *testing.T) {
	in := sample()
	assert.Equal(t, "XNAS #42 bid 101.25 x 300 xseq=987654321 flags=0x9", string(in.AppendText(nil)))
}

func FuzzDecode(f *testing.F) {
	good := make([]byte, Size)
	in := sample()
	if _, err := Encode(good, &in); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add(make([]byte, Size))
	f.Add(append(append([]byte(nil), good...), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out Tick
		err := Decode(b, &out)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if out != (Tick{}) {
				t.Fatalf("destination changed on error: %+v", out)
			}
			return
		}
		// A decoded tick is valid and re-encodes to the same bytes.
		re := make([]byte, Size)
		if _, err := Encode(re, &out); err != nil {
			t.Fatalf("decoded tick does not re-encode: %v", err)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, b)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	in := sample()
	buf := make([]byte, Size)
	b.ReportAllocs()
	b.SetBytes(Size)
	for b.Loop() {
		in.Price++
		if _, err := Encode(buf, &in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	in := sample()
	buf := make([]byte, Size)
	if _, err := Encode(buf, &in); err != nil {
		b.Fatal(err)
	}
	var out Tick
	b.ReportAllocs()
	b.SetBytes(Size)
	for b.Loop() {
		if err := Decode(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// refCheck is the wire form's rules written out field by field, as the
// package documents them: the model the branch-free check must match.
func refCheck(b []byte) bool {
	if len(b) != Size || b[offVersion] != Version || b[offKind] < 1 || b[offKind] > 3 {
		return false
	}
	if uint16(b[offFlags])|uint16(b[offFlags+1])<<8 > uint16(FlagsDefined) {
		return false
	}
	v := b[offVenue : offVenue+4]
	if v[0]|v[1]|v[2]|v[3] != 0 {
		for _, c := range v {
			if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	for _, c := range b[offInstrument : offInstrument+8] {
		if c != 0 {
			return true
		}
	}
	return false
}

// Every value of every byte of the checked words, one byte at a time from
// a good tick and from one with no venue: the SWAR check agrees with the
// field-by-field rules on each (2 x 16 x 256 cases).
func TestTick_Check_MatchesTheFieldRulesForEveryByteValue(t *testing.T) {
	in := sample()
	good := make([]byte, Size)
	_, err := Encode(good, &in)
	require.NoError(t, err)
	noVenue := append([]byte(nil), good...)
	copy(noVenue[offVenue:], []byte{0, 0, 0, 0})
	for _, base := range [][]byte{good, noVenue} {
		require.NoError(t, Check(base))
		for i := 0; i < 16; i++ {
			for c := 0; c < 256; c++ {
				b := append([]byte(nil), base...)
				b[i] = byte(c)
				want := refCheck(b)
				err := Check(b)
				if want != (err == nil) {
					t.Fatalf("byte %d = %#x: Check %v, rules say ok=%v", i, c, err, want)
				}
				var out Tick
				if want != (Decode(b, &out) == nil) {
					t.Fatalf("byte %d = %#x: Decode disagrees with the rules (ok=%v)", i, c, want)
				}
			}
		}
	}
}

// Two venue bytes at once, every pair of values: a venue is valid iff all
// four bytes are letters or digits or all are zero (a lone zero is not).
func TestVenue_Valid_MatchesTheRuleForEveryPairOfBytes(t *testing.T) {
	for a := 0; a < 256; a++ {
		for c := 0; c < 256; c++ {
			for _, v := range []Venue{{byte(a), byte(c), 'X', '1'}, {byte(a), 0, 0, byte(c)}} {
				b := make([]byte, Size)
				b[offVersion], b[offKind], b[offInstrument] = Version, byte(Trade), 1
				copy(b[offVenue:], v[:])
				if want := refCheck(b); v.Valid() != want {
					t.Fatalf("venue %q: Valid %v, want %v", v[:], v.Valid(), want)
				}
			}
		}
	}
}

// FuzzCheck: on any bytes, Check and Decode accept exactly what the
// field-by-field rules accept, and a refusal names a cause that the rules
// also see (the first failing field, in the documented order).
func FuzzCheck(f *testing.F) {
	good := make([]byte, Size)
	in := sample()
	if _, err := Encode(good, &in); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(make([]byte, Size))
	bad := append([]byte(nil), good...)
	bad[offVenue+2] = 0
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		want := refCheck(b)
		err := Check(b)
		if want != (err == nil) {
			t.Fatalf("Check(%x) = %v, rules say ok=%v", b, err, want)
		}
		var out Tick
		derr := Decode(b, &out)
		if !errors.Is(derr, err) && derr != err {
			t.Fatalf("Decode says %v, Check %v", derr, err)
		}
		if err == nil {
			return
		}
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		var cause error
		switch {
		case len(b) != Size:
			cause = errLength
		case b[offVersion] != Version:
			cause = errVersion
		case b[offKind] < 1 || b[offKind] > 3:
			cause = errWireKind
		case uint16(b[offFlags])|uint16(b[offFlags+1])<<8 > uint16(FlagsDefined):
			cause = errWireFlags
		case !Venue(b[offVenue : offVenue+4]).Valid():
			cause = errWireVenue
		default:
			cause = errWireInstr
		}
		if err != cause {
			t.Fatalf("Check(%x) = %v, want %v", b, err, cause)
		}
	})
}

// FuzzEncode: Encode accepts exactly the ticks Validate accepts, writes
// nothing otherwise, and what it writes decodes back to the tick.
func FuzzEncode(f *testing.F) {
	s := sample()
	f.Add(s.Instrument, s.Venue[:], uint8(s.Kind), uint16(s.Flags), s.Price, s.Size, s.ExchSeq)
	f.Add(uint64(0), []byte("XNAS"), uint8(1), uint16(0), int64(1), uint64(1), uint64(0))
	f.Add(uint64(1), []byte{0, 0, 0, 0}, uint8(3), uint16(0x1f), int64(-1), uint64(0), uint64(9))
	f.Add(uint64(1), []byte("xnas"), uint8(4), uint16(0x20), int64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, instr uint64, venue []byte, kind uint8, flags uint16, price int64, size, xseq uint64) {
		in := Tick{Instrument: instr, Kind: Kind(kind), Flags: Flags(flags), Price: price, Size: size,
			ExchTime: price ^ 5, PubTime: int64(size), ExchSeq: xseq}
		copy(in.Venue[:], venue)
		buf := bytes.Repeat([]byte{0xAA}, Size)
		n, err := Encode(buf, &in)
		if verr := in.Validate(); verr != nil {
			if err != verr || n != 0 || !bytes.Equal(buf, bytes.Repeat([]byte{0xAA}, Size)) {
				t.Fatalf("Encode(%+v) = %d, %v; Validate says %v", in, n, err, verr)
			}
			return
		}
		if err != nil || n != Size {
			t.Fatalf("Encode(%+v) = %d, %v, want a tick", in, n, err)
		}
		var out Tick
		if err := Decode(buf, &out); err != nil || out != in {
			t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
		}
	})
}
