// Package subscriber is tickbus's receiving side: a Subscriber owns one
// topic's ring in this process, announces it on the bus, lets publishers
// connect queue pairs to it, and polls it.
//
// Delivery: Handler.OnTicks is called once per batch of consecutive ticks
// with zero-copy views (valid until it returns), Handler.OnEvent between
// batches for every gap, overrun, skip or corrupt slot: every sequence is
// either delivered once or named by one event, never lost in silence.
// ReadInto is the pull form that copies one tick at a time.
//
// Every delivered tick's latency (receive time minus the publish time the
// publisher stamped, which for a paced feed is the intended send time) goes
// into a per-topic HdrHistogram through internal/stats's zero-alloc
// Recorder; a stats loop publishes an interval message on the bus every
// StatsInterval and hands it to Config.OnStats.
//
// Close withdraws the subscription (publishers drop the ring), drains what
// is already in the ring, publishes the last stats, closes the queue pairs
// and unmaps the ring.
package subscriber
