// Package feed turns exchange feeds into ticks on a topic: a Source is a
// feed adapter (feed/itch replays Nasdaq TotalView-ITCH 5.0 files,
// feed/csv replays CSV exports, Random wraps the synthetic random walk),
// and Replay drives one through a publisher at the feed's own pace, N
// times faster, or as fast as flow control allows.
//
// A/B lines: two publishers replaying the same feed as LineA and LineB
// publish each tick at the same topic sequence with PublishAt; the first
// compare-and-swap wins and the other line drops its copy, so subscribers
// see every tick once as long as either line delivers it.
package feed
