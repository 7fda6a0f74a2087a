package dash

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/stats"
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
	st := newStore(zerolog.Nop(), 100*time.Millisecond, 2, "")
	var reps []*stats.Reporter
	var recs []*stats.Recorder
	for _, sub := range []string{"a", "b", "c", "d"} {
		rec := stats.NewRecorder()
		recs = append(recs, rec)
		reps = append(reps, stats.NewReporter(stats.Meta{Topic: "t", Subscriber: sub}, rec))
	}
	for i := range 2 {
		_, err := st.apply(message(t, reps[i], recs[i], 1))
		require.NoError(t, err)
	}
	reason, err := st.apply(message(t, reps[2], recs[2], 1))
	assert.Equal(t, reasonSeries, reason, "both series are live: no room")
	assert.Error(t, err)

	time.Sleep(150 * time.Millisecond)
	_, err = st.apply(message(t, reps[1], recs[1], 2)) // b speaks again; a stays silent
	require.NoError(t, err)
	_, err = st.apply(message(t, reps[2], recs[2], 2))
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
