package stats

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Version is the stats message version this build writes and reads.
const Version = 1

// Bounds on what a message may hold. Counters stay below 2^53 so that every
// reader, JavaScript included, holds them exactly.
const (
	MaxMessageSize = 1 << 20 // NATS's default max_payload
	MaxTopicLen    = 256
	MaxNameLen     = 128 // subscriber, host
	MaxProviderLen = 32
	MaxCount       = 1<<53 - 1
	MaxRate        = 1e12 // ticks per second
	MaxInterval    = time.Hour
)

// Message is one subscriber's statistics for one topic over one interval.
type Message struct {
	Version    int    `json:"v"`
	Topic      string `json:"topic"`
	Subscriber string `json:"subscriber"`
	Host       string `json:"host"`
	Provider   string `json:"provider"` // shm, tcp, verbs, ...
	// CrossHost says the publisher runs on another host, so the latency
	// depends on clock synchronisation (PTP).
	CrossHost bool      `json:"cross_host"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	// Received, Gaps and Overruns are totals since the subscription began:
	// a lost stats message loses no count.
	Received uint64 `json:"received"`
	Gaps     uint64 `json:"gaps"`
	Overruns uint64 `json:"overruns"`
	// Tail is what the subscriber named lost at Close past the last
	// sequence it could account for: ticks the topic's counter says were
	// published, that never reached its ring (subscriber.Counters.Tail).
	// It is only ever set in the last message, and left out while 0, so
	// that a reader built before it (which refuses unknown fields) reads
	// every other message.
	Tail uint64 `json:"tail,omitempty"`
	// TailUnknown says the subscriber's Close could learn no bound to
	// name a tail by (subscriber.Counters.TailUnknown): its Tail 0 means
	// "could not be named", not "nothing missing". Only in the last
	// message, never with a Tail, and left out while false, as Tail is.
	TailUnknown bool `json:"tail_unknown,omitempty"`
	// Rate is ticks received per second over this interval.
	Rate float64 `json:"rate"`
	// Negative and Saturated count this interval's latencies clamped into
	// the histogram's range (below 0, above 10 s).
	Negative  uint64 `json:"negative"`
	Saturated uint64 `json:"saturated"`
	// Hist is the interval's latency histogram in nanoseconds, in
	// HdrHistogram's V2 compressed base64 encoding ("HISTF...").
	Hist string `json:"hist"`

	hist *hdrhistogram.Histogram // decoded Hist, set by Decode and Encode
	ours string                  // Hist as this package's Reporter encoded it (Encode skips its header check)
}

// LatencyHistogram returns the decoded interval histogram. The histogram is
// shared: callers must not record into it.
func (m *Message) LatencyHistogram() (*hdrhistogram.Histogram, error) {
	if m.hist == nil {
		h, err := decodeHist(m.Hist)
		if err != nil {
			return nil, err
		}
		m.hist = h
	}
	return m.hist, nil
}

// SetHistogram encodes h into m.Hist. h must have the recorder's geometry.
func (m *Message) SetHistogram(h *hdrhistogram.Histogram) error {
	if err := checkGeometry(int64(h.SignificantFigures()), h.LowestTrackableValue(), h.HighestTrackableValue()); err != nil {
		return err
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return fmt.Errorf("%w: encode: %v", ErrHistogram, err)
	}
	m.Hist, m.hist = string(b), h
	return nil
}

// Encode checks m and returns it as JSON.
func Encode(m *Message) ([]byte, error) {
	if m.Version == 0 {
		m.Version = Version
	}
	if err := m.validateFields(); err != nil {
		return nil, err
	}
	// A histogram this process encoded needs only its header checked
	// (SetHistogram), or nothing (a Reporter's, unchanged since); Decode
	// checks everything on the other side.
	if m.hist == nil && (m.ours == "" || m.Hist != m.ours) {
		if err := checkHistHeader(m.Hist); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	return b, nil
}

// Decode parses and checks a message that crossed a process boundary. It
// never panics; every error wraps one of the package's sentinel errors.
func Decode(b []byte) (*Message, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	var peek struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &peek); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if peek.V == nil {
		return nil, fmt.Errorf("%w: no version field", ErrMalformed)
	}
	if *peek.V != Version {
		return nil, fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, *peek.V, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := new(Message)
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks every field, decoding the histogram if needed.
func (m *Message) Validate() error {
	if err := m.validateFields(); err != nil {
		return err
	}
	h, err := m.LatencyHistogram()
	if err != nil {
		return err
	}
	if tc := h.TotalCount(); tc > MaxCount {
		return fmt.Errorf("%w: histogram count %d > %d", ErrInvalid, tc, uint64(MaxCount))
	}
	return nil
}

func (m *Message) validateFields() error {
	if m.Version != Version {
		return fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, m.Version, Version)
	}
	if err := checkName("topic", m.Topic, MaxTopicLen, false); err != nil {
		return err
	}
	if err := checkName("subscriber", m.Subscriber, MaxNameLen, false); err != nil {
		return err
	}
	if err := checkName("host", m.Host, MaxNameLen, true); err != nil {
		return err
	}
	if err := checkName("provider", m.Provider, MaxProviderLen, true); err != nil {
		return err
	}
	lo := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	hi := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	if m.Start.Before(lo) || m.Start.After(hi) {
		return fmt.Errorf("%w: start %v outside 2000..2200", ErrInvalid, m.Start)
	}
	if m.End.Before(m.Start) || m.End.Sub(m.Start) > MaxInterval {
		return fmt.Errorf("%w: end %v not within %v after start %v", ErrInvalid, m.End, MaxInterval, m.Start)
	}
	for _, c := range []struct {
		name string
		v    uint64
	}{{"received", m.Received}, {"gaps", m.Gaps}, {"overruns", m.Overruns}, {"tail", m.Tail}, {"negative", m.Negative}, {"saturated", m.Saturated}} {
		if c.v > MaxCount {
			return fmt.Errorf("%w: %s %d > %d", ErrInvalid, c.name, c.v, uint64(MaxCount))
		}
	}
	if m.TailUnknown && m.Tail != 0 {
		return fmt.Errorf("%w: tail_unknown with a tail of %d (a tail that is named is known)", ErrInvalid, m.Tail)
	}
	if math.IsNaN(m.Rate) || m.Rate < 0 || m.Rate > MaxRate {
		return fmt.Errorf("%w: rate %v not within 0..%g", ErrInvalid, m.Rate, MaxRate)
	}
	return nil
}

func checkName(field, s string, maxLen int, mayBeEmpty bool) error {
	if s == "" && !mayBeEmpty {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, field, len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, field)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %s %q holds a space or control character", ErrInvalid, field, s)
		}
	}
	return nil
}

func checkGeometry(sig, lowest, highest int64) error {
	if sig != SignificantFigures || lowest != LowestValue || highest != HighestValue {
		return fmt.Errorf("%w: geometry %d..%d at %d digits, want %d..%d at %d",
			ErrHistogram, lowest, highest, sig, LowestValue, HighestValue, SignificantFigures)
	}
	return nil
}

// maxHistLen bounds the base64 text: a dense histogram of our geometry
// compresses far below this, and it keeps the message under MaxMessageSize.
const maxHistLen = MaxMessageSize - 4096

// decodeHist checks the V2 header's geometry before the library allocates
// counts for it, then decodes.
func decodeHist(s string) (*hdrhistogram.Histogram, error) {
	if err := checkHistHeader(s); err != nil {
		return nil, err
	}
	h, err := hdrhistogram.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHistogram, err)
	}
	return h, nil
}

// checkHistHeader checks the base64 framing, the cookie and the geometry in
// the compressed header, inflating only the header's 40 bytes.
func checkHistHeader(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrHistogram)
	}
	if len(s) > maxHistLen {
		return fmt.Errorf("%w: %d bytes > %d", ErrHistogram, len(s), maxHistLen)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("%w: base64: %v", ErrHistogram, err)
	}
	if len(raw) < 8 {
		return fmt.Errorf("%w: %d bytes, too short", ErrHistogram, len(raw))
	}
	if cookie := binary.BigEndian.Uint32(raw) &^ 0xf0; cookie != uint32(hdrhistogram.V2CompressedEncodingCookieBase) {
		return fmt.Errorf("%w: cookie %#x is not V2 compressed", ErrHistogram, cookie)
	}
	n := binary.BigEndian.Uint32(raw[4:])
	if uint64(n) > uint64(len(raw)-8) {
		return fmt.Errorf("%w: compressed length %d > %d bytes present", ErrHistogram, n, len(raw)-8)
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[8 : 8+n]))
	if err != nil {
		return fmt.Errorf("%w: zlib: %v", ErrHistogram, err)
	}
	var hdr [40]byte
	_, err = io.ReadFull(z, hdr[:])
	_ = z.Close()
	if err != nil {
		return fmt.Errorf("%w: header: %v", ErrHistogram, err)
	}
	sig := int64(int32(binary.BigEndian.Uint32(hdr[12:])))
	lowest := int64(binary.BigEndian.Uint64(hdr[16:]))
	highest := int64(binary.BigEndian.Uint64(hdr[24:]))
	return checkGeometry(sig, lowest, highest)
}
