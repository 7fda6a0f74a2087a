package stats

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// countsEncoder writes a recorder buffer's counts straight into
// HdrHistogram's V2 compressed encoding, base64 (what Message.Hist
// carries and hdrhistogram.Decode reads), reusing its buffers and its
// zlib writer from one interval to the next. hdrhistogram-go's Encode
// allocates a new best-compression zlib writer and a slice per count every
// time: about 890 KB and 2300 allocations, 2 ms of a stats loop's second,
// taken from a core that a hot thread needs (BenchmarkReporter_NextEncode
// before this encoder). The stats loop owns one.
//
// Layout (big-endian): cookie V2CompressedEncodingCookieBase|0x10, the
// compressed length, then zlib of: cookie V2EncodingCookieBase|0x10, the
// counts' length, normalizing index offset 0, significant figures, lowest
// and highest trackable value, conversion ratio 1.0 (float64 bits), and
// the counts up to the last non-zero one as ZigZag LEB128 (9 bytes at
// most, the ninth carrying 8 bits), a run of two or more zeros as its
// negated length.
type countsEncoder struct {
	raw  []byte // the uncompressed header and counts
	z    bytes.Buffer
	zw   *zlib.Writer
	out  []byte // the framed compressed bytes
	text []byte // base64 of out
}

const (
	encodingCookie           = uint32(hdrhistogram.V2EncodingCookieBase) | 0x10
	compressedEncodingCookie = uint32(hdrhistogram.V2CompressedEncodingCookieBase) | 0x10
	encodingHeaderSize       = 40
)

// encode returns counts (countSlots of them, indexed as countIndex) in the
// V2 compressed encoding.
func (e *countsEncoder) encode(counts []uint64) (string, error) {
	last := 0
	for i := len(counts) - 1; i > 0; i-- {
		if counts[i] != 0 {
			last = i
			break
		}
	}
	raw := append(e.raw[:0], make([]byte, encodingHeaderSize)...)
	for i := 0; i <= last; {
		c := counts[i]
		i++
		if c == 0 {
			zeros := int64(1)
			for i <= last && counts[i] == 0 {
				zeros++
				i++
			}
			if zeros > 1 {
				raw = appendZigZag(raw, -zeros)
				continue
			}
		}
		if c > math.MaxInt64 {
			return "", fmt.Errorf("%w: count %d out of range", ErrHistogram, c)
		}
		raw = appendZigZag(raw, int64(c))
	}
	h := raw[:encodingHeaderSize]
	binary.BigEndian.PutUint32(h[0:], encodingCookie)
	binary.BigEndian.PutUint32(h[4:], uint32(len(raw)-encodingHeaderSize))
	binary.BigEndian.PutUint32(h[8:], 0) // normalizing index offset
	binary.BigEndian.PutUint32(h[12:], uint32(SignificantFigures))
	binary.BigEndian.PutUint64(h[16:], uint64(LowestValue))
	binary.BigEndian.PutUint64(h[24:], uint64(HighestValue))
	binary.BigEndian.PutUint64(h[32:], math.Float64bits(1))
	e.raw = raw

	e.z.Reset()
	if e.zw == nil {
		zw, err := zlib.NewWriterLevel(&e.z, zlib.BestSpeed)
		if err != nil {
			return "", fmt.Errorf("%w: zlib: %v", ErrHistogram, err)
		}
		e.zw = zw
	} else {
		e.zw.Reset(&e.z)
	}
	if _, err := e.zw.Write(raw); err != nil {
		return "", fmt.Errorf("%w: zlib: %v", ErrHistogram, err)
	}
	if err := e.zw.Close(); err != nil {
		return "", fmt.Errorf("%w: zlib: %v", ErrHistogram, err)
	}
	out := binary.BigEndian.AppendUint32(e.out[:0], compressedEncodingCookie)
	out = binary.BigEndian.AppendUint32(out, uint32(e.z.Len()))
	out = append(out, e.z.Bytes()...)
	e.out = out
	n := base64.StdEncoding.EncodedLen(len(out))
	if cap(e.text) < n {
		e.text = make([]byte, n)
	}
	e.text = e.text[:n]
	base64.StdEncoding.Encode(e.text, out)
	return string(e.text), nil
}

// appendZigZag appends v as a ZigZag LEB128 of at most 9 bytes.
func appendZigZag(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for i := 0; i < 8; i++ {
		if u < 0x80 {
			return append(b, byte(u))
		}
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u)) // the ninth byte: all 8 bits
}
