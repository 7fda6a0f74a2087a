package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReport_RoundTrip_KeepsFiguresAndHistogram(t *testing.T) {
	h := newHist()
	for v := int64(1); v < 100000; v += 37 {
		record(h, v)
	}
	var b bytes.Buffer
	require.NoError(t, writeReport(&b, report{Done: true, Count: 7, Sent: 8, Lost: 1, StartNs: 10, LastNs: 20, hist: h}))
	r, err := decodeReport(bytes.TrimSpace(b.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, int64(7), r.Count)
	assert.Equal(t, int64(8), r.Sent)
	assert.Equal(t, int64(1), r.Lost)
	require.NotNil(t, r.hist)
	assert.True(t, h.Equals(r.hist))
}

func TestReport_Decode_RejectsMalformedLines(t *testing.T) {
	for _, line := range []string{
		``, `{`, `[]`, `{}`, `{"ready":true,"done":true}`,
		`{"done":true,"count":-1}`, `{"done":true,"lost":-3}`,
		`{"done":true,"hist":"not base64!"}`, `{"done":true,"hist":"AAAA"}`,
		`{"done":true,"count":"seven"}`,
	} {
		_, err := decodeReport([]byte(line))
		assert.ErrorIs(t, err, ErrBadReport, "%q", line)
	}
	_, err := decodeReport(bytes.Repeat([]byte(" "), maxReportLine+1))
	assert.ErrorIs(t, err, ErrBadReport)
}

func FuzzDecodeReport(f *testing.F) {
	h := newHist()
	record(h, 1234)
	var b bytes.Buffer
	_ = writeReport(&b, report{Done: true, Count: 1, hist: h})
	f.Add(bytes.TrimSpace(b.Bytes()))
	f.Add([]byte(`{"ready":true,"info":"nats://127.0.0.1:4222"}`))
	f.Add([]byte(`{"done":true,"err":"boom"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := decodeReport(line)
		if err != nil {
			return
		}
		if r.Ready == r.Done || r.Count < 0 || r.Sent < 0 || r.Lost < 0 {
			t.Fatalf("accepted an invalid report %+v", r)
		}
		if r.Hist != "" && r.hist == nil {
			t.Fatalf("histogram text accepted but not decoded")
		}
		if r.hist != nil {
			_ = r.hist.ValueAtQuantile(99.9) // usable
		}
	})
}
