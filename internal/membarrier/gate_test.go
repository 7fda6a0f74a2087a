package membarrier_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/membarrier"
)

// gates are the two kinds: NewGate's (plain stores where Fence works) and
// the zero value's (sequentially consistent stores).
func gates() map[string]func() *membarrier.Gate {
	return map[string]func() *membarrier.Gate{
		"new":  membarrier.NewGate,
		"zero": func() *membarrier.Gate { return &membarrier.Gate{} },
	}
}

func TestGate_EnterAfterShut_Refused(t *testing.T) {
	for name, mk := range gates() {
		t.Run(name, func(t *testing.T) {
			g := mk()
			require.True(t, g.Enter())
			g.Leave()
			assert.False(t, g.IsShut())
			require.True(t, g.Shut(time.Second))
			assert.True(t, g.IsShut())
			assert.False(t, g.Enter(), "a section after Shut must not run")
			assert.True(t, g.Shut(time.Second), "Shut again: still nothing runs (the refused Enter left busy 0)")
		})
	}
}

func TestGate_Shut_WaitsForTheSection(t *testing.T) {
	for name, mk := range gates() {
		t.Run(name, func(t *testing.T) {
			g := mk()
			require.True(t, g.Enter())
			var left atomic.Bool
			go func() {
				time.Sleep(50 * time.Millisecond)
				left.Store(true)
				g.Leave()
			}()
			require.True(t, g.Shut(5*time.Second))
			assert.True(t, left.Load(), "Shut returned before the section left")
		})
	}
}

func TestGate_Shut_GivesUpAfterWait(t *testing.T) {
	g := membarrier.NewGate()
	require.True(t, g.Enter())
	start := time.Now()
	assert.False(t, g.Shut(20*time.Millisecond), "a section that never leaves: Shut says so")
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	assert.False(t, g.Enter())
	g.Leave()
	assert.True(t, g.Shut(time.Second))
}

// The property Close needs: once Shut returns true, memory the sections
// write can be unmapped under a goroutine that keeps trying to enter. A
// gate that let one section through, or returned while one ran, faults
// here (a write to an unmapped page kills the test binary).
func TestGate_UnmapAfterShut_NoSectionTouchesIt(t *testing.T) {
	for name, mk := range gates() {
		t.Run(name, func(t *testing.T) {
			for round := 0; round < 200; round++ {
				mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
				require.NoError(t, err)
				g := mk()
				var wg sync.WaitGroup
				var sections atomic.Int64
				started := make(chan struct{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					once := false
					for i := 0; ; i++ {
						if !g.Enter() {
							return
						}
						for j := 0; j < 64; j++ {
							mem[(i+j*64)&4095]++
						}
						g.Leave()
						sections.Add(1)
						if !once {
							once = true
							close(started)
						}
					}
				}()
				<-started
				if round%2 == 1 {
					time.Sleep(time.Duration(round%7) * 10 * time.Microsecond)
				}
				require.True(t, g.Shut(5*time.Second))
				require.NoError(t, unix.Munmap(mem))
				wg.Wait()
				require.Positive(t, sections.Load())
			}
		})
	}
}

// BenchmarkGate_EnterLeave is what the gate adds to every publish and
// every Poll: Enter and Leave with no Close, cache-hot.
func BenchmarkGate_EnterLeave(b *testing.B) {
	for name, mk := range gates() {
		b.Run(name, func(b *testing.B) {
			g := mk()
			b.ReportAllocs()
			for b.Loop() {
				if !g.Enter() {
					b.Fatal("refused")
				}
				g.Leave()
			}
		})
	}
}
