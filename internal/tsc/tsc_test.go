package tsc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRead_MovesWithTime(t *testing.T) {
	if !Trusted {
		t.Skip("the kernel's clocksource is not the TSC here")
	}
	a := Read()
	time.Sleep(2 * time.Millisecond)
	b := Read()
	assert.Greater(t, b, a, "the counter did not advance over 2 ms")
}

var sink int64

func BenchmarkRead(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink += Read()
	}
}
