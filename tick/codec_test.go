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
