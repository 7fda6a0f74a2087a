// Package stats records one-way tick latency on the subscriber's hot path and
// carries interval statistics to the dashboard over NATS.
//
// A Recorder belongs to one topic of one subscriber. Its single writer (the
// subscriber's poll goroutine) calls Record for every tick: no allocation, no
// lock, no syscall, two uncontended atomic adds. A reader (the stats loop)
// calls Snapshot or SnapshotInto once an interval; a writer–reader phaser, as
// in HdrHistogram's Recorder, flips the writer onto the second of two
// buffers of bucket counts (indexed as the histogram's own) and waits only
// for a record already in flight, so the writer is never blocked; the
// snapshot moves the counts into the interval's histogram.
//
// Every interval a Reporter turns the recorder's interval histogram and the
// subscriber's counters into a Message: topic, subscriber, host, provider,
// interval start and end, totals of ticks received, gaps and overruns, the
// interval's rate, whether the latency crosses hosts (so depends on clock
// synchronisation), and the histogram in HdrHistogram's standard V2
// compressed base64 form ("HISTF..."), which HdrHistogram's own tools in every
// language read. Encode and Decode carry a Message as versioned JSON, bounded
// in size and checked field by field; Subject names the NATS subject:
//
//	<prefix>.stats.<topic>.<subscriber>    (prefix "tickbus" by default)
//
// Histograms cover 1 ns to 10 s at 3 significant digits. A negative latency
// (clock skew between hosts) is recorded as 0 and counted; one above 10 s is
// recorded as 10 s and counted; neither is dropped in silence.
package stats
