// Package publisher is tickbus's publishing side: a Publisher that puts
// ticks and opaque messages on a topic (Publish, PublishBatch, PublishAt),
// and a synthetic feed (Feed, Pacer, RunFeed) that drives one at a target
// rate or as fast as possible.
//
// Paced feeds stamp each tick with its intended send time, and a Pacer
// schedules from intended times, never from the last actual send, so a
// stalled publisher shows up in the subscribers' latency rather than hiding
// (no coordinated omission).
package publisher
