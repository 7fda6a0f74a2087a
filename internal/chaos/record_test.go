package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecorder_RecordsSurviveAndDecode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	w, err := Create(path, 3)
	require.NoError(t, err)
	want := []Record{
		{Kind: KindDelivered, Publisher: 7, A: 1, B: 99, Ns: 5},
		{Kind: KindEvent, Sub: 2, A: 2, B: 9, Ns: 6},
		{Kind: KindPublished, Publisher: 7, A: 10, B: 1 << 63, Ns: -1},
	}
	for _, r := range want {
		require.NoError(t, w.Add(r))
	}
	assert.ErrorIs(t, w.Add(want[0]), ErrRecordFull)
	assert.Equal(t, uint64(1), w.Dropped())
	assert.Equal(t, 3, w.Len())
	// Read while still mapped, as after a SIGKILL: the page cache has it.
	got, err := ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "second Close")
	got, err = ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestRecorder_UnwrittenTailEndsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	w, err := Create(path, 100)
	require.NoError(t, err)
	require.NoError(t, w.Add(Record{Kind: KindFailed, Publisher: 1, B: 3}))
	got, err := ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, got, 1)
	require.NoError(t, w.Close())
	_, err = Create(path, 0)
	assert.ErrorContains(t, err, "capacity")
	var nilRec *Recorder
	assert.NoError(t, nilRec.Add(Record{Kind: KindDelivered}), "a nil recorder records nothing")
	_, err = ReadFile(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestDecode_RejectsWhatNoRecorderWrites(t *testing.T) {
	good := func() []byte {
		b := make([]byte, RecordSize)
		b[0] = KindEvent
		b[8], b[16] = 1, 2
		return b
	}
	_, err := Decode(good())
	require.NoError(t, err)
	for name, mod := range map[string]func([]byte) []byte{
		"unknown kind":    func(b []byte) []byte { b[0] = 'Z'; return b },
		"short record":    func(b []byte) []byte { return b[:RecordSize-1] },
		"padding":         func(b []byte) []byte { b[3] = 1; return b },
		"event backwards": func(b []byte) []byte { b[8] = 3; return b },
		"event from 0":    func(b []byte) []byte { b[8] = 0; return b },
		"tick sub-kind":   func(b []byte) []byte { b[0] = KindDelivered; b[1] = 1; return b },
	} {
		_, err := Decode(mod(good()))
		assert.ErrorIs(t, err, ErrBadRecord, name)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, RecordSize))
	b := make([]byte, 2*RecordSize)
	b[0], b[8], b[16] = KindEvent, 1, 2
	b[RecordSize] = KindDelivered
	f.Add(b)
	f.Add(b[:RecordSize+5])
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := Decode(b)
		if len(recs)*RecordSize > len(b) {
			t.Fatalf("%d records from %d bytes", len(recs), len(b))
		}
		for _, r := range recs {
			if r.Kind == KindEvent && (r.A == 0 || r.A > r.B) {
				t.Fatalf("bad event decoded: %+v (err %v)", r, err)
			}
		}
	})
}
