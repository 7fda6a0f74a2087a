// Package bench is `tickbus bench`: side-by-side latency and throughput of
// tickbus against its peers, taken in one run, on one machine, with the same
// tick and the same method, and shown as ratios to tickbus-shm.
//
// Cases (Config.Cases, table order):
//
//	tickbus-shm  tickbus publisher and subscriber in two processes over the shm provider
//	tickbus-tcp  the same over the tcp provider on loopback
//	nats         NATS core pub/sub through a nats-server in its own process,
//	             nats.go publisher and subscriber in two more processes
//	chan         a Go buffered channel between two goroutines (in-process baseline)
//	floor        a ring of cache-line slots in memfd shared memory between two
//	             processes: one line handed over per tick, the physical limit here
//	jitter       two spinning threads measuring their own lateness on the
//	             latency run's schedule: the platform's own noise
//
// Method. Every transport is driven by the same publisher and subscriber
// loops (loops.go). A latency run paces sends at Config.Rate; each message
// carries its intended send time, and the subscriber records receive time
// minus intended time into an HdrHistogram (1 ns .. 10 s, 3 digits), so a
// stalled publisher cannot hide its stall (no coordinated omission). Clocks
// are CLOCK_MONOTONIC, shared by all processes of the host. A throughput run
// sends as fast as the transport accepts for Config.ThroughputDuration, one
// tick per send ("single") and Config.Batch ticks per send ("batched"); the
// subscriber's count over the time from the publisher's start to the last
// delivery is the figure. CPU seconds per million ticks are the user+system
// time (getrusage) of every process of the case (or this process for the
// in-process cases) over a throughput run, per delivered tick. Runs go one
// after another, never concurrently; every loop is bounded by a deadline.
//
// Output: a table on stdout; Config.JSON, one object per case; under
// Config.Out one HdrHistogram log (.hlog) per case, scaling.svg and
// scaling.json.
//
// Child processes run through internal/child roles registered in this
// package's init; main and any TestMain that runs the bench call
// child.Main first.
package bench
