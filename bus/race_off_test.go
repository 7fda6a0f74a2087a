//go:build !race

package bus_test

const raceOn = false
