package stats

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testMessage(t testing.TB) *Message {
	t.Helper()
	h := NewHistogram()
	for i := int64(1); i <= 10000; i++ {
		require.NoError(t, h.RecordValue(i*37))
	}
	start := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	m := &Message{
		Version: Version, Topic: "md.AAPL", Subscriber: "engine-1", Host: "hostA", Provider: "shm",
		Start: start, End: start.Add(time.Second),
		Received: 10000, Gaps: 3, Overruns: 1, Tail: 7, Rate: 10000,
	}
	require.NoError(t, m.SetHistogram(h))
	return m
}

func TestMessage_EncodeDecode_RoundTrips(t *testing.T) {
	m := testMessage(t)
	b, err := Encode(m)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), `"hist":"HISTF`), "standard V2 compressed base64 form: %.80s", b)

	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, m.Topic, got.Topic)
	assert.Equal(t, m.Subscriber, got.Subscriber)
	assert.Equal(t, m.Host, got.Host)
	assert.Equal(t, m.Provider, got.Provider)
	assert.True(t, m.Start.Equal(got.Start))
	assert.True(t, m.End.Equal(got.End))
	assert.Equal(t, m.Received, got.Received)
	assert.Equal(t, m.Gaps, got.Gaps)
	assert.Equal(t, m.Overruns, got.Overruns)
	assert.Equal(t, m.Tail, got.Tail)
	assert.Equal(t, m.Rate, got.Rate)
	h, err := got.LatencyHistogram()
	require.NoError(t, err)
	want, err := m.LatencyHistogram()
	require.NoError(t, err)
	assert.Equal(t, want.TotalCount(), h.TotalCount())
	for _, q := range []float64{50, 90, 99, 99.9, 100} {
		assert.Equal(t, want.ValueAtQuantile(q), h.ValueAtQuantile(q), "p%v", q)
	}
}

func TestDecode_RejectsBadInput(t *testing.T) {
	good, err := Encode(testMessage(t))
	require.NoError(t, err)
	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	otherGeometry := hdrhistogram.New(1, 1<<40, 5)
	require.NoError(t, otherGeometry.RecordValue(5))
	og, err := otherGeometry.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	require.NoError(t, err)

	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"garbage", []byte("\x00\x01garbage"), ErrMalformed},
		{"json array", []byte(`[1,2]`), ErrMalformed},
		{"no version", edit(func(m map[string]any) { delete(m, "v") }), ErrMalformed},
		{"unknown version", edit(func(m map[string]any) { m["v"] = 2 }), ErrVersion},
		{"version zero", edit(func(m map[string]any) { m["v"] = 0 }), ErrVersion},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), ErrMalformed},
		{"trailing data", append(append([]byte{}, good...), []byte(` {}`)...), ErrMalformed},
		{"too large", make([]byte, MaxMessageSize+1), ErrTooLarge},
		{"empty topic", edit(func(m map[string]any) { m["topic"] = "" }), ErrInvalid},
		{"topic with newline", edit(func(m map[string]any) { m["topic"] = "a\nb" }), ErrInvalid},
		{"long topic", edit(func(m map[string]any) { m["topic"] = strings.Repeat("t", MaxTopicLen+1) }), ErrInvalid},
		{"empty subscriber", edit(func(m map[string]any) { m["subscriber"] = "" }), ErrInvalid},
		{"negative counter", edit(func(m map[string]any) { m["received"] = -1 }), ErrMalformed},
		{"absurd counter", edit(func(m map[string]any) { m["gaps"] = uint64(1) << 60 }), ErrInvalid},
		{"absurd tail", edit(func(m map[string]any) { m["tail"] = uint64(1) << 60 }), ErrInvalid},
		{"negative tail", edit(func(m map[string]any) { m["tail"] = -1 }), ErrMalformed},
		{"tail not a number", edit(func(m map[string]any) { m["tail"] = "7" }), ErrMalformed},
		{"absurd rate", edit(func(m map[string]any) { m["rate"] = 1e300 }), ErrInvalid},
		{"negative rate", edit(func(m map[string]any) { m["rate"] = -1 }), ErrInvalid},
		{"end before start", edit(func(m map[string]any) { m["end"] = "2020-01-01T00:00:00Z" }), ErrInvalid},
		{"interval too long", edit(func(m map[string]any) { m["end"] = "2026-12-30T00:00:00Z" }), ErrInvalid},
		{"zero start", edit(func(m map[string]any) { m["start"] = "0001-01-01T00:00:00Z" }), ErrInvalid},
		{"bad time", edit(func(m map[string]any) { m["start"] = "yesterday" }), ErrMalformed},
		{"empty histogram", edit(func(m map[string]any) { m["hist"] = "" }), ErrHistogram},
		{"histogram not base64", edit(func(m map[string]any) { m["hist"] = "HISTF!!!" }), ErrHistogram},
		{"histogram truncated", edit(func(m map[string]any) { m["hist"] = m["hist"].(string)[:40] }), ErrHistogram},
		{"histogram of other geometry", edit(func(m map[string]any) { m["hist"] = string(og) }), ErrHistogram},
		{"histogram wrong cookie", edit(func(m map[string]any) { m["hist"] = "AAAAAAAAAAAAAAAA" }), ErrHistogram},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Decode(c.in)
			assert.ErrorIs(t, err, c.want)
			assert.Nil(t, m)
		})
	}
}

// A message without a tail (every one but a closing subscriber's last)
// carries no tail field, so readers of the format before it was added
// read it; one with a tail carries it.
func TestEncode_TailOnlyWhenNamed(t *testing.T) {
	m := testMessage(t)
	m.Tail = 0
	b, err := Encode(m)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"tail"`)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Zero(t, got.Tail)

	m.Tail = 42
	b, err = Encode(m)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"tail":42`)
}

// TailUnknown travels as Tail does: left out while false, so readers
// before it read every other message; a message claiming both a tail and
// that the tail is unknown is refused on both sides.
func TestEncode_TailUnknownOnlyWhenSet_NeverWithATail(t *testing.T) {
	m := testMessage(t)
	m.Tail = 0
	b, err := Encode(m)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `tail_unknown`)

	m.TailUnknown = true
	b, err = Encode(m)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"tail_unknown":true`)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.True(t, got.TailUnknown)
	assert.Zero(t, got.Tail)

	m.Tail = 3
	_, err = Encode(m)
	require.ErrorIs(t, err, ErrInvalid)
	forged := bytes.Replace(b, []byte(`"tail_unknown":true`), []byte(`"tail":3,"tail_unknown":true`), 1)
	require.NotEqual(t, b, forged)
	got, err = Decode(forged)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Nil(t, got)
}

func TestEncode_RejectsInvalidMessage(t *testing.T) {
	m := testMessage(t)
	m.Topic = ""
	_, err := Encode(m)
	assert.ErrorIs(t, err, ErrInvalid)

	m = testMessage(t)
	err = m.SetHistogram(hdrhistogram.New(1, 1000, 2))
	assert.ErrorIs(t, err, ErrHistogram)
}

func TestReporter_Next_ComputesRateAndCarriesInterval(t *testing.T) {
	r := NewRecorder()
	p := NewReporter(Meta{Topic: "t", Subscriber: "s", Host: "h", Provider: "tcp", CrossHost: true}, r)
	for i := int64(1); i <= 100; i++ {
		r.Record(i * 1000)
	}
	time.Sleep(20 * time.Millisecond)
	m, err := p.Next(Counters{Received: 100, Gaps: 2, Overruns: 1, Tail: 5})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), m.Tail)
	assert.True(t, m.CrossHost)
	assert.Equal(t, "tcp", m.Provider)
	d := m.End.Sub(m.Start).Seconds()
	require.Greater(t, d, 0.0)
	assert.InDelta(t, 100/d, m.Rate, 1e-6)
	h, err := m.LatencyHistogram()
	require.NoError(t, err)
	assert.Equal(t, int64(100), h.TotalCount())

	var sent []byte
	var subj string
	r.Record(5)
	require.NoError(t, p.Publish("", Counters{Received: 150}, func(s string, b []byte) error { subj, sent = s, b; return nil }))
	assert.Equal(t, "tickbus.stats.t.s", subj)
	got, err := Decode(sent)
	require.NoError(t, err)
	assert.Equal(t, uint64(150), got.Received)
	assert.InDelta(t, 50/got.End.Sub(got.Start).Seconds(), got.Rate, 1e-6)
	h, err = got.LatencyHistogram()
	require.NoError(t, err)
	assert.Equal(t, int64(1), h.TotalCount())
}

func FuzzDecode(f *testing.F) {
	good, err := Encode(testMessage(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	noTail := testMessage(f)
	noTail.Tail = 0
	if b, err := Encode(noTail); err == nil {
		f.Add(b)
	}
	f.Add(bytes.Replace(good, []byte(`"tail":7`), []byte(`"tail":9007199254740992`), 1)) // 2^53: over MaxCount
	f.Add(bytes.Replace(good, []byte(`"tail":7`), []byte(`"tail":-1`), 1))
	f.Add(bytes.Replace(good, []byte(`"tail":7`), []byte(`"tail":7,"tail_unknown":true`), 1)) // both: refused
	f.Add(bytes.Replace(good, []byte(`"tail":7`), []byte(`"tail_unknown":true`), 1))
	f.Add(bytes.Replace(good, []byte(`"tail":7`), []byte(`"tail_unknown":1`), 1))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":2,"topic":"x"}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if m != nil {
				t.Fatalf("message with error %v", err)
			}
			return
		}
		// Whatever decodes re-encodes and decodes to the same counters.
		out, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		m2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		h1, _ := m.LatencyHistogram()
		h2, _ := m2.LatencyHistogram()
		if m2.Received != m.Received || m2.Gaps != m.Gaps || m2.Overruns != m.Overruns || m2.Tail != m.Tail || h1.TotalCount() != h2.TotalCount() {
			t.Fatalf("round trip changed the message")
		}
	})
}

// The stats loop's cost per interval (off the hot path): swap, encode the
// histogram, marshal.
func BenchmarkReporter_NextEncode(b *testing.B) {
	r := NewRecorder()
	p := NewReporter(Meta{Topic: "t", Subscriber: "s"}, r)
	b.ReportAllocs()
	var size int
	for i := 0; b.Loop(); i++ {
		for v := int64(1); v <= 10000; v += 7 {
			r.Record(1000 + v)
		}
		m, err := p.Next(Counters{Received: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		out, err := Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "msg-bytes")
}

func BenchmarkDecode(b *testing.B) {
	data, err := Encode(testMessage(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
