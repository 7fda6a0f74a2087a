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
// into a per-topic HdrHistogram through stats's zero-alloc
// Recorder; a stats loop publishes an interval message on the bus every
// StatsInterval and hands it to Config.OnStats. The receive time is read
// once per batch, as it is delivered; the histogram is updated by the next
// empty Poll, or by a Poll that starts with 16 or more latencies held (a
// saturated loop), and at Close: after the caller has the ticks.
//
// Joining a running topic: before it answers a publisher's connect (so
// before that publisher can add the ring), the subscriber asks the topic's
// home for its counter and the ring starts there (ring.Reader.StartAt);
// sequences claimed between that and the publisher adding the ring were
// never going to be written into it and are counted in
// Counters.BeforeJoin, not reported as gaps. A ring still empty JoinGrace
// after a connect is restarted at the counter once more (what it passes
// over is counted the same way). A tick claimed below the start but still
// on its way when the start was chosen, landing after it, is counted in
// BeforeJoin too (the reader watches below its start for 10 s:
// ring.Reader.WatchBelow).
//
// Providers: each publisher comes over the provider its node picks for
// this one (bus.Node.ProviderFor: shm on the same host id, tcp across
// hosts, or the node's bus.provider override). The ring is allocated once,
// on Config.Provider's device, and registered on each other device the
// first time a publisher comes over it (ring.Ring.RegisterOn); the connect
// reply carries the descriptor for that device. So one ring takes shm
// writes from this host and tcp writes from others at once. The stats
// message's provider field, and Providers, name the set in use ("shm",
// "tcp", "shm+tcp"); each connect is logged with its provider.
//
// Wildcards: NewWildcard takes a pattern ("md.nasdaq.>", "md.*.itch")
// and runs one Subscriber per matching topic the bus hears of, present and
// future (it looks every DiscoverEvery), all polled by one goroutine; each
// topic keeps its own ring, sequence, events and stats, and a
// TopicHandler is told the topic of every batch.
//
// The tail: a publisher that stopped writing to this ring (it dropped it,
// crashed, was fenced) leaves nothing after the hole when nobody publishes
// after it, so the reader's gap scan would find nothing to wait for. The
// subscriber learns the topic's counter (tail.go: the record a closing
// home leaves, bus.HomeInfo.End; the home's answer when a publisher goes
// without withdrawing and when this node's NATS connection comes back; the
// journal's counter READ; and once more at Close)
// and gives it to the reader (ring.Reader.SetClaimed), which names the
// missing range as one ring.EventGap (Counters.Gaps); what is still
// missing after Close's drain is named there (Counters.Tail). Both count
// in Lost. A sequence named is never delivered afterwards. A home gone
// without a recorded end, with no journal and nobody holding the topic's
// lease, leaves no counter: what the ring misses below the epoch's
// reservation is then named the ended epoch's, one ring.EventEpoch
// (Counters.Epoch), as the next epoch's record would name it.
//
// A publisher whose node the bus lost by heartbeat (bus.ErrPeerLost) while
// one of its queue pairs is up keeps them (the bus holds it:
// publisherReachable), as publishers keep a lost subscriber's (see
// packages bus and publisher), until they fail, its node leaves or
// restarts, or bus.Config.UnheardHold (30 s by default) passes. The last
// stats message a closing subscriber publishes carries its tail
// (stats.Message.Tail).
//
// Close withdraws the subscription (publishers drop the ring), drains what
// is already in the ring, publishes the last stats, closes the queue pairs
// and unmaps the ring.
package subscriber
