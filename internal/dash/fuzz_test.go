package dash

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/stats"
)

// Whatever arrives on a stats subject, the dashboard's store neither panics
// nor loses count: every message is accepted or rejected, exactly once.
func FuzzStore_Handle(f *testing.F) {
	rec := stats.NewRecorder()
	rep := stats.NewReporter(stats.Meta{Topic: "md.AAPL", Subscriber: "s", Host: "h", Provider: "tcp"}, rec)
	for _, v := range []int64{1, 10, 100, 1000, -1, 1 << 40} {
		rec.Record(v)
	}
	m, err := rep.Next(stats.Counters{Received: 6})
	if err != nil {
		f.Fatal(err)
	}
	good, err := stats.Encode(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1,"topic":"t"}`))
	f.Add([]byte(`{"v":7}`))
	f.Add([]byte("\x00garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newStore(zerolog.Nop(), time.Minute, 4, "")
		st.handle("tickbus.stats.x.y", b)
		st.handle("tickbus.stats.x.y", b) // the same again: accepted at most once
		accepted, rejected := st.counts()
		var n uint64
		for _, c := range rejected {
			n += c
		}
		if accepted+n != 2 || accepted > 1 {
			t.Fatalf("2 messages: %d accepted, %v rejected", accepted, rejected)
		}
		for _, v := range st.views(true) {
			if v.Last.Count < 0 || len(v.Points) > 1 {
				t.Fatalf("bad view %+v", v)
			}
		}
	})
}
