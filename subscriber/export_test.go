package subscriber

import (
	"context"

	"github.com/tickbus/tickbus/bus"
)

// NoAskOnReconnect turns off the question a subscriber asks the home when
// its node's NATS connection comes back, until restore is called: for a
// test of the question Close asks by itself. Call it before New.
func NoAskOnReconnect() (restore func()) {
	old := noAskOnReconnect.Swap(true)
	return func() { noAskOnReconnect.Store(old) }
}

// SilentHome makes every question to the topic's home fail, until restore
// is called: a home that never answers (its host starved or cut off).
func SilentHome() (restore func()) {
	return setAskHook(func(*Subscriber, context.Context, bus.PeerInfo) (homeCounter, error) {
		return homeCounter{}, context.DeadlineExceeded
	})
}

// ForgetHome drops the home record s holds, as if its watcher had not
// delivered one yet.
func ForgetHome(s *Subscriber) { s.home.Store(nil) }
