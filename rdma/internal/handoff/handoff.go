// Package handoff lets a poll loop know that a goroutine of this process
// was just readied (a parked flusher woken by a post) and waits for a
// scheduler slot, so that its next idle step lets it run at once.
//
// Why: rdma.Yield calls runtime.Gosched only about once in 64 idle steps
// (8 while a tcp queue pair is open), as each Gosched wakes an idle P's
// thread. A goroutine readied by a
// spinning poller goes into that poller's P (its runnext) and, with the
// other P busy, runs only when the poller yields its P: up to tens of
// microseconds later. Mark says a hand-off is pending; the woken goroutine
// calls Done; Pending reports a hand-off marked within window and not done,
// and Yield (and Adaptive) then call Gosched, which runs the readied goroutine next
// on this P. The hint is process-wide (a poller on another P may Gosched
// in vain meanwhile) and bounded in time, so a lost Done costs window.
package handoff

import (
	"sync/atomic"
	"time"
)

// window bounds how long a mark makes idle steps Gosched.
const window = int64(50 * time.Microsecond)

var mark struct {
	_  [64]byte
	at atomic.Int64 // clock at the pending hand-off; 0: none. Written per wake-up, read per idle step
	_  [56]byte
}

var epoch = time.Now()

func now() int64 { return int64(time.Since(epoch)) + 1 } // never 0

// Mark records a hand-off to a goroutine just readied.
func Mark() { mark.at.Store(now()) }

// Done says the readied goroutine runs.
func Done() {
	if mark.at.Load() != 0 {
		mark.at.Store(0)
	}
}

// Pending reports a hand-off marked within window and not done; it reads
// the clock only while one is marked.
func Pending() bool {
	t := mark.at.Load()
	if t == 0 {
		return false
	}
	if now()-t < window {
		return true
	}
	mark.at.CompareAndSwap(t, 0)
	return false
}

// net counts this process's open tcp data connections (rdma/tcp's
// rawConn, registered with its epoll poller). Each brings goroutines that
// share the Ps with the application's poll loop: a reader that spins with
// rdma.Yield before it parks, a flusher, a reaper, and the poller, whose
// wake-ups ready them. They take turns on a P through Gosched, so while
// one is open Yield Goschedules more often (rdma/idle_linux.go).
var net struct {
	_ [64]byte
	n atomic.Int64
	_ [56]byte
}

// NetOpen says a socket read through the netpoller is open; NetClose, once
// for each NetOpen, that it is closed.
func NetOpen()  { net.n.Add(1) }
func NetClose() { net.n.Add(-1) }

// Net reports whether a NetOpen is not yet closed.
func Net() bool { return net.n.Load() > 0 }
