package dash

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyBuckets are the upper bounds, in seconds, of tickbus_latency_seconds:
// 1-2-5 steps from 100 ns to 10 s.
var latencyBuckets = []float64{
	100e-9, 200e-9, 500e-9,
	1e-6, 2e-6, 5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6,
	1e-3, 2e-3, 5e-3, 10e-3, 20e-3, 50e-3, 100e-3, 200e-3, 500e-3,
	1, 2, 5, 10,
}

var (
	labels          = []string{"topic", "subscriber"}
	descReceived    = prometheus.NewDesc("tickbus_ticks_received_total", "Ticks received by the subscriber since it subscribed.", labels, nil)
	descGaps        = prometheus.NewDesc("tickbus_gaps_total", "Sequences the subscriber reported as gaps since it subscribed.", labels, nil)
	descOverruns    = prometheus.NewDesc("tickbus_overruns_total", "Times the publisher lapped the subscriber's ring since it subscribed.", labels, nil)
	descTail        = prometheus.NewDesc("tickbus_tail_total", "Sequences the subscriber named lost at Close: published, never reached its ring, nothing after them.", labels, nil)
	descTailUnknown = prometheus.NewDesc("tickbus_tail_unknown", "1 when the subscriber's Close could learn no bound to name a tail by (tickbus_tail_total 0 then means unknown, not none).", labels, nil)
	descRate        = prometheus.NewDesc("tickbus_tick_rate", "Ticks per second received over the last interval.", labels, nil)
	descLatency     = prometheus.NewDesc("tickbus_latency_seconds", "One-way tick latency since the dashboard started (from HdrHistogram intervals; the sum is count times the HdrHistogram mean).", labels, nil)
	descInterval    = prometheus.NewDesc("tickbus_latency_interval_seconds", "One-way tick latency over the last interval, from its HdrHistogram.", labels, nil)
	descClamped     = prometheus.NewDesc("tickbus_latency_clamped_total", "Latencies outside 0..10 s recorded at the range's edge, since the dashboard started.", append(labels, "reason"), nil)
	descInfo        = prometheus.NewDesc("tickbus_subscriber_info", "Where a subscription runs and which provider carries it (value 1). cross_host=true means its latency depends on clock sync.", append(labels, "host", "provider", "cross_host"), nil)
	descLastSeen    = prometheus.NewDesc("tickbus_stats_last_timestamp_seconds", "End of the last interval received, Unix seconds.", labels, nil)
	descAccepted    = prometheus.NewDesc("tickbus_dash_messages_total", "Stats messages the dashboard accepted.", nil, nil)
	descRejected    = prometheus.NewDesc("tickbus_dash_rejected_total", "Stats messages the dashboard ignored, by reason.", []string{"reason"}, nil)
	descSeries      = prometheus.NewDesc("tickbus_dash_series", "Topic and subscriber pairs the dashboard tracks.", nil, nil)
)

// collector exports the store's state at each scrape.
type collector struct{ s *store }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReceived, descGaps, descOverruns, descTail, descTailUnknown, descRate, descLatency, descInterval,
		descClamped, descInfo, descLastSeen, descAccepted, descRejected, descSeries} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.series {
		v := &se.view
		lv := []string{v.Topic, v.Subscriber}
		ch <- prometheus.MustNewConstMetric(descReceived, prometheus.CounterValue, float64(v.Received), lv...)
		ch <- prometheus.MustNewConstMetric(descGaps, prometheus.CounterValue, float64(v.Gaps), lv...)
		ch <- prometheus.MustNewConstMetric(descOverruns, prometheus.CounterValue, float64(v.Overruns), lv...)
		ch <- prometheus.MustNewConstMetric(descTail, prometheus.CounterValue, float64(v.Tail), lv...)
		unknown := 0.0
		if v.TailUnknown {
			unknown = 1
		}
		ch <- prometheus.MustNewConstMetric(descTailUnknown, prometheus.GaugeValue, unknown, lv...)
		ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, v.Rate, lv...)
		ch <- prometheus.MustNewConstMetric(descClamped, prometheus.CounterValue, float64(v.Negative), v.Topic, v.Subscriber, "negative")
		ch <- prometheus.MustNewConstMetric(descClamped, prometheus.CounterValue, float64(v.Saturated), v.Topic, v.Subscriber, "saturated")
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, v.Topic, v.Subscriber, v.Host, v.Provider, strconv.FormatBool(v.CrossHost))
		ch <- prometheus.MustNewConstMetric(descLastSeen, prometheus.GaugeValue, float64(v.LastEnd)/1e3, lv...)

		// Cumulative bucket counts from the merged HdrHistogram: a value
		// counts toward every bound at or above its bucket's highest
		// equivalent value.
		buckets := make(map[float64]uint64, len(latencyBuckets))
		bi := 0
		var cum uint64
		for _, bar := range se.total.Distribution() {
			if bar.Count == 0 {
				continue
			}
			for bi < len(latencyBuckets) && float64(bar.To)/1e9 > latencyBuckets[bi] {
				buckets[latencyBuckets[bi]] = cum
				bi++
			}
			cum += uint64(bar.Count)
		}
		for ; bi < len(latencyBuckets); bi++ {
			buckets[latencyBuckets[bi]] = cum
		}
		n := uint64(se.total.TotalCount())
		ch <- prometheus.MustNewConstHistogram(descLatency, n, se.total.Mean()*float64(n)/1e9, buckets, lv...)

		q := map[float64]float64{
			0.5: float64(v.Last.P50) / 1e9, 0.9: float64(v.Last.P90) / 1e9, 0.99: float64(v.Last.P99) / 1e9,
			0.999: float64(v.Last.P999) / 1e9, 0.9999: float64(v.Last.P9999) / 1e9, 1: float64(v.Last.Max) / 1e9,
		}
		ch <- prometheus.MustNewConstSummary(descInterval, uint64(v.Last.Count), v.Last.Mean*float64(v.Last.Count)/1e9, q, lv...)
	}
	ch <- prometheus.MustNewConstMetric(descAccepted, prometheus.CounterValue, float64(s.accepted))
	for _, r := range []string{reasonMalformed, reasonVersion, reasonInvalid, reasonHistogram, reasonTooLarge, reasonSeries, reasonOutOfOrder, reasonDropped} {
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue, float64(s.rejected[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(descSeries, prometheus.GaugeValue, float64(len(s.series)))
}
