package dash

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/stats"
)

func message(t *testing.T, rep *stats.Reporter, rec *stats.Recorder, received uint64) *stats.Message {
	t.Helper()
	rec.Record(1234)
	time.Sleep(time.Millisecond)
	m, err := rep.Next(stats.Counters{Received: received})
	require.NoError(t, err)
	return m
}

func TestStore_SeriesLimit_MakesRoomOnlyForSilentSeries(t *testing.T) {
	const history = time.Second
	st := newStore(zerolog.Nop(), history, 2, "")
	msgs := map[string][]*stats.Message{}
	for _, sub := range []string{"a", "b", "c"} {
		rec := stats.NewRecorder()
		rep := stats.NewReporter(stats.Meta{Topic: "t", Subscriber: sub}, rec)
		msgs[sub] = []*stats.Message{message(t, rep, rec, 1), message(t, rep, rec, 2)}
	}
	_, err := st.apply(msgs["a"][0])
	require.NoError(t, err)
	_, err = st.apply(msgs["b"][0])
	require.NoError(t, err)
	reason, err := st.apply(msgs["c"][0])
	assert.Equal(t, reasonSeries, reason, "both series are live: no room")
	assert.Error(t, err)

	time.Sleep(history + 200*time.Millisecond)
	_, err = st.apply(msgs["b"][1]) // b speaks again; a stays silent
	require.NoError(t, err)
	_, err = st.apply(msgs["c"][1])
	require.NoError(t, err, "a has been silent longer than the history: c takes its place")
	var keys []string
	for _, v := range st.views(false) {
		keys = append(keys, v.Key)
	}
	assert.Equal(t, []string{"t/b", "t/c"}, keys)
}

func TestStore_OutOfOrderInterval_Rejected(t *testing.T) {
	st := newStore(zerolog.Nop(), time.Minute, 10, "")
	rec := stats.NewRecorder()
	rep := stats.NewReporter(stats.Meta{Topic: "t", Subscriber: "s"}, rec)
	first := message(t, rep, rec, 1)
	second := message(t, rep, rec, 2)
	_, err := st.apply(second)
	require.NoError(t, err)
	reason, err := st.apply(first)
	assert.Equal(t, reasonOutOfOrder, reason)
	assert.Error(t, err)
	v := st.views(true)
	require.Len(t, v, 1)
	assert.Equal(t, uint64(2), v[0].Received, "the older interval changed nothing")
	assert.Len(t, v[0].Points, 1)
}

func TestStore_History_DropsOldPoints(t *testing.T) {
	st := newStore(zerolog.Nop(), 30*time.Millisecond, 10, "")
	rec := stats.NewRecorder()
	rep := stats.NewReporter(stats.Meta{Topic: "t", Subscriber: "s"}, rec)
	for i := range 5 {
		_, err := st.apply(message(t, rep, rec, uint64(i)))
		require.NoError(t, err)
	}
	time.Sleep(50 * time.Millisecond)
	_, err := st.apply(message(t, rep, rec, 9))
	require.NoError(t, err)
	v := st.views(true)
	require.Len(t, v, 1)
	assert.Len(t, v[0].Points, 1, "points older than the history are gone")
	assert.Equal(t, uint64(6), v[0].Intervals)
	assert.Equal(t, int64(6), v[0].Total.Count, "the merged histogram keeps everything")
}

// What one stats message costs the dashboard: decode, merge into the
// series' histogram, percentiles and the distribution curve.
func BenchmarkStore_Handle(b *testing.B) {
	rec := stats.NewRecorder()
	rep := stats.NewReporter(stats.Meta{Topic: "t", Subscriber: "s"}, rec)
	st := newStore(zerolog.Nop(), time.Minute, 10, "")
	msgs := make([][]byte, 64)
	for i := range msgs {
		for v := int64(1); v <= 20000; v += 3 {
			rec.Record(1000 + v*int64(i+1))
		}
		time.Sleep(time.Millisecond)
		m, err := rep.Next(stats.Counters{Received: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		if msgs[i], err = stats.Encode(m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%len(msgs) == 0 { // a fresh store so that intervals stay in order
			st = newStore(zerolog.Nop(), time.Minute, 10, "")
		}
		st.handle("tickbus.stats.t.s", msgs[i%len(msgs)])
		i++
	}
	if acc, rej := st.counts(); acc == 0 {
		b.Fatalf("nothing accepted: %v", rej)
	}
}
