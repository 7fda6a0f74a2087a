// Package dash serves tickbus's latency dashboard and the terminal stat view.
//
// Both are tickbus clients (tickbus.Connect, Client.WatchStats: the same
// connection, credentials and TLS code as every program on the bus): they
// watch the stats subjects (<prefix>.stats.>) that subscribers publish every
// interval (see stats) and keep, per topic and subscriber, the latest counters,
// the last interval's histogram, a histogram merged since the dashboard
// started and a time series of percentiles over the last minutes.
//
// Start (or Serve) runs the web dashboard on one listener:
//
//	/             the page: live charts of p50, p99, p99.9 and max per topic
//	              and subscriber, the percentile distribution on HdrHistogram's
//	              "nines" axis, rates, gaps, overruns, the tail a closing
//	              subscriber named (? when it could name none), and
//	              provider, with a topic and
//	              subscriber selector. Every asset is embedded in the
//	              binary; nothing is fetched from elsewhere.
//	/api/state    every series as JSON (what the page loads first)
//	/events       server-sent events: a series' update as each message lands
//	/metrics      Prometheus text format, every name prefixed tickbus_
//
// With Config.HlogDir set it also writes one HdrHistogram interval log
// (.hlog, format 1.3) per topic and subscriber, readable by HdrHistogram's
// own tools (HistogramLogProcessor, hdr-histogram-js, hdrhistogram-go).
//
// RunStat prints the same figures in the terminal, refreshed every second,
// as AeronStat does for Aeron.
//
// A bad stats message (garbage, an unknown version, absurd values, a flood)
// is logged once per kind, counted in tickbus_dash_rejected_total and
// ignored; the dashboard keeps serving.
package dash
