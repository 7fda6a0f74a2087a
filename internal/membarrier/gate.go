package membarrier

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Gate keeps Close from tearing down what a hot section on another
// goroutine is using, at the cost of two plain stores and a load per
// section: the hot goroutine brackets each section with Enter and Leave,
// and the closing goroutine calls Shut, which refuses every later Enter and
// waits for a section under way to Leave. It is the Dekker handshake of
// the package doc: Enter stores busy and then loads shut with no fence
// between; Shut stores shut, calls Fence, then loads busy. Either Enter
// sees shut (and its section does not run) or Shut sees busy (and waits).
// Where Fence is not available (NewGate found it so, or the Gate is a zero
// value), Enter's store is a sequentially consistent one instead.
//
// One goroutine at a time runs sections; Shut may be called from any. The
// Gate's own line is its own: the hot goroutine writes it every section.
type Gate struct {
	_    [64]byte
	busy uint64 // 1 while a section runs; stored by the hot goroutine only
	shut atomic.Bool
	weak bool // Fence works: Enter's store may be a plain one
	_    [64]byte
}

// NewGate returns a Gate whose Enter takes the plain store where Fence
// works here.
func NewGate() *Gate {
	g := &Gate{}
	g.Init()
	return g
}

// Init readies a Gate embedded in another value (NewGate's work). Call it
// before the Gate is shared.
func (g *Gate) Init() { g.weak = Available() }

// Enter starts a section: false once Shut has been called (run nothing
// that touches what Close releases, and do not Leave).
func (g *Gate) Enter() bool {
	if g.weak {
		StoreRelease(&g.busy, 1)
	} else {
		atomic.StoreUint64(&g.busy, 1)
	}
	if g.shut.Load() {
		StoreRelease(&g.busy, 0)
		return false
	}
	return true
}

// Leave ends the section Enter started.
func (g *Gate) Leave() { StoreRelease(&g.busy, 0) }

// Shut refuses every later Enter and waits up to wait for a section under
// way to Leave: true when none runs (nor will), false when one still did
// at the end of the wait. It does not return before every store the
// section made is visible to this goroutine. Idempotent.
func (g *Gate) Shut(wait time.Duration) bool {
	g.shut.Store(true)
	if g.weak {
		// weak only where Available found the barrier working: it then
		// fails only for a bad command or an unregistered process,
		// neither of which can happen here, so its result is not looked at.
		Fence()
	}
	if atomic.LoadUint64(&g.busy) == 0 {
		return true
	}
	end := time.Now().Add(wait)
	for spins := 0; atomic.LoadUint64(&g.busy) != 0; spins++ {
		if time.Now().After(end) {
			return false
		}
		if spins < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return true
}

// IsShut reports whether Shut was called.
func (g *Gate) IsShut() bool { return g.shut.Load() }
