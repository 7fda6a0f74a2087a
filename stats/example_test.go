package stats_test

import (
	"fmt"

	"github.com/tickbus/tickbus/stats"
)

// A subscriber records each tick's latency on its poll goroutine and, once
// an interval on its stats loop, publishes what was recorded.
func Example() {
	rec := stats.NewRecorder()
	rep := stats.NewReporter(stats.Meta{Topic: "md.AAPL", Subscriber: "engine-1", Host: "h1", Provider: "shm"}, rec)

	// Poll goroutine, per tick: rec.Record(receiveNs - tick.PublishNs).
	for _, ns := range []int64{900, 1200, 1500, 40_000} {
		rec.Record(ns)
	}

	// Stats loop, every second.
	publish := func(subject string, data []byte) error {
		m, err := stats.Decode(data) // what the dashboard does on the other side
		if err != nil {
			return err
		}
		h, err := m.LatencyHistogram()
		if err != nil {
			return err
		}
		fmt.Println(subject, m.Received, h.TotalCount(), h.ValueAtQuantile(50), h.Max())
		return nil
	}
	if err := rep.Publish("", stats.Counters{Received: 4}, publish); err != nil {
		fmt.Println(err)
	}
	// Output: tickbus.stats.md.AAPL.engine-1 4 4 1200 40031
}
