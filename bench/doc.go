// Package bench is `tickbus bench`: side-by-side latency and throughput of
// tickbus against its peers, taken in one run, on one machine, with the same
// tick and the same method, and shown as ratios to tickbus-shm.
//
// Cases (Config.Cases, table order):
//
//	tickbus-shm  a publisher and a subscriber process of the public API
//	             (tickbus.Connect, Client.Publisher, Client.Subscribe) on
//	             the bus, NATS embedded in this process; shm between them
//	tickbus-tcp  the same with the tcp provider forced (loopback)
//	nats         NATS core pub/sub through a nats-server in its own process,
//	             nats.go publisher and subscriber in two more processes
//	chan         a Go buffered channel between two goroutines (in-process baseline)
//	floor        a ring of cache-line slots in memfd shared memory between two
//	             processes: one line handed over per tick, the physical limit here
//	jitter       two spinning threads measuring their own lateness on the
//	             latency run's schedule: the platform's own noise
//
// The message is the same everywhere: a u64 sequence and the 56-byte tick of
// package tick (64 bytes; Config.Size pads it), encoded by the publisher
// and decoded (validated) by the subscriber of every case. The tickbus
// cases are programs of the public API, what users run: the bus finds the
// topic's home (its first publisher), exchanges queue pairs and
// descriptors over NATS and picks the provider per peer (tickbus.go).
//
// Method. Every transport is driven by the same publisher and subscriber
// loops (loops.go) through the same idle strategy. A latency run paces
// sends at Config.Rate; each tick carries its intended send time and the
// subscriber records receive time minus intended time into an HdrHistogram
// (1 ns .. 10 s, 3 digits), so a stalled publisher cannot hide its stall (no
// coordinated omission). A publisher that falls so far behind that it has
// not sent everything by a bound (the run's end plus its length, at least
// 1 s) stops, and each unsent tick enters the histogram at bound minus
// intended time, a lower bound; the row says how many. Clocks are
// CLOCK_MONOTONIC (runtime nanotime, vDSO), the same in every process of
// the host. Ping-pong (Config.PingPong) sends each tick back on a second
// topic and records the round trip at the publisher the same way.
//
// A throughput run sends as fast as the transport accepts for
// Config.ThroughputDuration, one tick per send ("single") and Config.Batch
// per send ("batched": ring PublishBatch, one floor room check, one channel
// element, one NATS message of Batch ticks); the figure is the slowest
// subscriber's count over the time from the publisher's start to its last
// delivery. Loss is counted from sequence gaps, never hidden. CPU seconds
// per million ticks are the user+system time (getrusage) of every process of
// the case over its run loop (the NATS server's from /proc; for tickbus,
// this process's too, as it hosts the bus's NATS server), per delivered tick, over both
// throughput runs. Scaling (Config.Scaling) runs tickbus-shm with 1, 2, 4, 8
// subscribers and with 1, 2, 4 publishers on one counter.
//
// What the tail is made of (2 cores, two hot threads per case: any other
// work displaces one of them, and a paced tick waits for it). Measured on
// 2026-12-01 from the slow ticks' times (.slow.csv, below): in the tickbus
// case the slow ticks came in bursts of 300-900 µs on the bus's heartbeat
// cycle (bus.Config.HeartbeatInterval, then 250 ms, 500 ms since), each
// heartbeat signed by its sender and checked (ed25519) by every other
// node; with the interval at 2.5 s (a test build only) p99 went from 206 to
// 71 µs while the floor's went from 30 to 56 µs (load 2). Since 2026-12-02
// this process runs a bare nats-server (JetStream, a token) for the tickbus
// cases, not a bus node: the bus's nodes are the publisher's and the
// subscribers', as in a deployment; a tickbus publisher starts its run once
// every subscriber has attached the home's journal and its credit cell
// (those attaches had landed inside the paced run); and every child collects
// its start-up garbage before its loop. The floor's and the jitter probe's
// processes run no bus, so a tickbus p99 beside theirs includes the control
// plane's cost, as a deployment on so few cores would. Any other tickbus
// node on the host heartbeats on the same period and shows in every case's
// slow ticks. The floor's own p99 over the jitter probe's is the idle
// strategy's: every runtime.Gosched of a yielding poller wakes the idle P's
// thread (futex) onto the core the peer polls on, which the probe's two
// busy goroutines never do (perf stat: 1.2-1.9 M futex calls in a floor
// run against 223 in the probe's); rdma.Yield Goscheds once in 64 idle
// steps since (once in 8 while a tcp queue pair is open).
//
// Runs go one after another, never concurrently; every loop and wait is
// bounded by a deadline; every child is stopped (killed if it hangs) when
// its run ends. Hot threads are pinned with Config.CPUs (and only then
// locked to their threads).
//
// Output: a table on stdout; Config.JSON, one object per case (fields of
// Result; a figure a case lacks is null and its note says why); under
// Config.Out one HdrHistogram log (.hlog) per case, scaling.json,
// scaling.svg and, with Config.Profile, one CPU profile per child process
// and, beside a latency run's subscriber's, its slow ticks (.slow.csv: the
// intended time and latency of each tick over 30 µs, to see when they came).
//
// Child processes run through internal/child roles registered in this
// package's init; main and any TestMain that runs the bench call
// child.Main first.
package bench
