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
// Paced feeds stamp each tick with its intended send time, and a Pacer
// schedules from intended times, never from the last actual send, so a
// stalled publisher shows up in the subscribers' latency rather than hiding
// (no coordinated omission).
package publisher
