package stats

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodeMatches encodes counts with e and checks that hdrhistogram-go
// decodes the text to the histogram that recording the same counts gives.
func encodeMatches(t testing.TB, e *countsEncoder, counts []uint64) {
	t.Helper()
	want := NewHistogram()
	for i, c := range counts {
		if c != 0 {
			require.NoError(t, want.RecordValues(indexValue(i), int64(c)))
		}
	}
	text, err := e.encode(counts)
	require.NoError(t, err)
	require.NoError(t, checkHistHeader(text))
	got, err := hdrhistogram.Decode([]byte(text))
	require.NoError(t, err)
	assert.Equal(t, want.TotalCount(), got.TotalCount())
	assert.Equal(t, want.Export().Counts, got.Export().Counts)
	assert.Equal(t, want.Max(), got.Max())
	assert.Equal(t, want.Min(), got.Min())
	assert.Equal(t, int64(SignificantFigures), got.SignificantFigures())
	assert.Equal(t, HighestValue, got.HighestTrackableValue())
	// The library's own encoding of the same histogram decodes the same.
	lib, err := want.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	require.NoError(t, err)
	fromLib, err := hdrhistogram.Decode(lib)
	require.NoError(t, err)
	assert.True(t, fromLib.Equals(got), "the library's encoding and ours decode alike")
}

// The counts encoder's text is what hdrhistogram-go decodes to the
// histogram those counts make: empty, single values at both ends, zero
// runs of every length, counts that need all nine ZigZag bytes, and a dense
// random spread; one encoder reused across all of them.
func TestCountsEncoder_DecodesToTheSameHistogram(t *testing.T) {
	var e countsEncoder
	counts := make([]uint64, countSlots)
	cases := []func(){
		func() {},
		func() { counts[0] = 1 },
		func() { counts[countIndex(HighestValue)] = 3 },
		func() { counts[1], counts[3], counts[6], counts[10] = 1, 2, 3, 4 }, // zero runs of 1, 2, 3
		func() { counts[100], counts[101] = 1<<62, 1<<56+12345 },
		func() {
			r := rand.New(rand.NewPCG(1, 2))
			for range 20000 {
				counts[r.IntN(countSlots)] += uint64(r.IntN(1000))
			}
		},
	}
	for i, set := range cases {
		clear(counts)
		set()
		t.Run(string(rune('a'+i)), func(t *testing.T) { encodeMatches(t, &e, counts) })
	}
}

// Once its buffers have grown, an encode allocates only the string it returns.
func TestCountsEncoder_ReusesItsBuffers(t *testing.T) {
	var e countsEncoder
	counts := make([]uint64, countSlots)
	for i := 500; i < 3000; i += 3 {
		counts[i] = uint64(i)
	}
	_, err := e.encode(counts)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(20, func() { _, _ = e.encode(counts) })
	assert.LessOrEqual(t, allocs, 1.0)
}

// Any counts encode to text that decodes to the same histogram.
func FuzzCountsEncoder(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0x5f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f})
	var e countsEncoder
	counts := make([]uint64, countSlots)
	f.Fuzz(func(t *testing.T, b []byte) {
		clear(counts)
		// Each 10 bytes: a 2-byte index (mod countSlots) and an 8-byte count
		// (below 2^62, so a total stays representable).
		for ; len(b) >= 10; b = b[10:] {
			i := int(binary.LittleEndian.Uint16(b)) % countSlots
			counts[i] = binary.LittleEndian.Uint64(b[2:]) >> 2
		}
		var total uint64
		for _, c := range counts {
			total += c
		}
		if total>>62 != 0 {
			t.Skip("a total past int64: not a histogram")
		}
		encodeMatches(t, &e, counts)
	})
}

// Encode trusts a Reporter's histogram only while it is the one the
// Reporter encoded: a Hist changed afterwards is checked again.
func TestEncode_ChecksAReporterHistChangedSince(t *testing.T) {
	r := NewRecorder()
	r.Record(1234)
	m, err := NewReporter(Meta{Topic: "t", Subscriber: "s"}, r).Next(Counters{Received: 1})
	require.NoError(t, err)
	_, err = Encode(m)
	require.NoError(t, err)
	m.Hist = "HISTFAAAAbogus"
	_, err = Encode(m)
	assert.ErrorIs(t, err, ErrHistogram)
}
