// Package link owns what a link between two peers is made of, below the
// bus and above the ring, so that publisher, subscriber, the counter query
// and bench build it one way:
//
//   - Devices: the rdma devices (providers) of one process, opened on first
//     use (shm for peers on this host, tcp for the others) and closed
//     together; the provider per peer is the bus's choice
//     (bus.Node.ProviderFor).
//   - Profile: queue-pair and completion-queue depths, one per role
//     (Writer, Responder, Query), and Open, which makes the pair.
//   - AlsoOn: one region (a subscriber's ring, a topic's home) registered on
//     a second device the first time a peer comes over that provider, so
//     one memory serves shm peers and tcp peers at once.
//   - Backoff: the retry and reconnect policy of a connect to a peer.
//
// Programs using the root package tickbus never touch this package; it is
// public so that publisher.New and subscriber.New, which take a *Devices,
// are callable from other modules.
package link
