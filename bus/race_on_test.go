//go:build race

package bus_test

// raceOn: the race detector makes every signature check about 20 times
// slower (ed25519 in Go, instrumented), so control messages take longer to
// be processed; tests that bound a timing window of the protocol (a claim
// window) widen it under -race.
const raceOn = true
