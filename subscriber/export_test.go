package subscriber

// NoAskOnReconnect turns off the question a subscriber asks the home when
// its node's NATS connection comes back, until restore is called: for a
// test of the question Close asks by itself. Call it before New.
func NoAskOnReconnect() (restore func()) {
	old := askOnReconnect
	askOnReconnect = false
	return func() { askOnReconnect = old }
}
