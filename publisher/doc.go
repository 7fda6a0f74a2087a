// Package publisher is tickbus's publishing side: a Publisher that puts
// ticks and opaque messages on a topic (Publish, PublishBatch, PublishAt),
// and a synthetic feed (Feed, Pacer, RunFeed) that drives one at a target
// rate or as fast as possible.
//
// Providers: each queue pair uses the provider the bus picks for its peer
// (shm on the same host id, tcp across hosts, or the node's override), and
// each connect is logged with it. A topic's home is allocated on
// Config.Provider's device, its own publisher claims through a loopback
// queue pair there (shm by default), and the home is registered on another
// device when a publisher claims over it (ring.Home.RegisterOn), so local
// publishers claim through shm and remote ones through tcp on one counter:
// both providers' atomics are CPU atomics on the same memory. A home whose
// device's atomics are atomic only among themselves (verbs without
// global atomics) is never shared with another provider (ErrMixedProviders).
//
// Subscribers a node's bus cannot hear: the bus drops a peer silent for
// its HeartbeatTimeout (bus.ErrPeerLost), but a node away from NATS (its
// server died, its reconnect is slow on a loaded host) is not a dead one,
// and its ring is still reachable. The bus holds such a subscriber while
// the publisher says its queue pair is up (subscriberReachable:
// rdma.QPReadyToSend, and not dropped by the writer; the rule and its one
// setting, bus.Config.UnheardHold, 30 s by default, are the bus's: see
// package bus). The writer goes on writing into its ring meanwhile, and
// when its node is heard again and re-announces the same ring (same
// incarnation) it is the same target, with no new connection and nothing
// written twice. It is dropped once, logged and counted (UnheardDrops;
// the writer's own drops in Stats().Dropped), as soon as its queue pair
// fails (a dead host: the writer's error or unanswered completion while
// it publishes, tcp's watchdog and keepalive, shm's peer socket, a verbs
// QP in ERR; the bus looks every 50 ms while it holds it), or when the
// hold ends. A subscriber that withdrew, left or restarted is dropped at
// once, as before. A negative UnheardHold drops a lost one at once too.
//
// A closing publisher that is the topic's home fences its counter and
// hands the value it ended at to the bus (bus.PublishSpec.EndCounter),
// which writes it into the home record: a subscriber it had stopped
// writing to learns from it what it never received.
//
// Paced feeds stamp each tick with its intended send time, and a Pacer
// schedules from intended times, never from the last actual send, so a
// stalled publisher shows up in the subscribers' latency rather than hiding
// (no coordinated omission).
package publisher
