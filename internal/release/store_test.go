package release_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tickbus/tickbus/internal/release"
)

func TestStore64_StoresTheWholeWord(t *testing.T) {
	var w uint64
	release.Store64(&w, 0x0123456789abcdef)
	assert.Equal(t, uint64(0x0123456789abcdef), atomic.LoadUint64(&w))
	release.Store64(&w, 0)
	assert.Zero(t, atomic.LoadUint64(&w))
}

// A reader that sees the flag sees every store made before it: 64 payload
// words written plainly, then the flag with Store64. Many rounds; both sides
// yield while they wait.
func TestStore64_PublishesEarlierStores(t *testing.T) {
	const rounds = 20000
	var payload [64]uint64
	var flag uint64
	var ack atomic.Uint64
	done := make(chan int, 1)
	go func() {
		bad := 0
		for r := uint64(1); r <= rounds; r++ {
			for atomic.LoadUint64(&flag) != r {
				runtime.Gosched()
			}
			for i := range payload {
				if payload[i] != r {
					bad++
				}
			}
			ack.Store(r)
		}
		done <- bad
	}()
	for r := uint64(1); r <= rounds; r++ {
		for i := range payload {
			payload[i] = r
		}
		release.Store64(&flag, r)
		for ack.Load() != r {
			runtime.Gosched()
		}
	}
	assert.Zero(t, <-done, "payload words older than the flag")
}

func BenchmarkStore64(b *testing.B) {
	var w uint64
	for i := 0; b.Loop(); i++ {
		release.Store64(&w, uint64(i))
	}
}

func BenchmarkAtomicStoreUint64(b *testing.B) {
	var w uint64
	for i := 0; b.Loop(); i++ {
		atomic.StoreUint64(&w, uint64(i))
	}
}
