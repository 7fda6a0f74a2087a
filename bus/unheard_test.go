package bus_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// unheardSpec is pubSpec with a liveness check the test sets (reachable)
// and the hold's callbacks recorded; every gone reason goes to gone.
func unheardSpec(topic string, rec *recorder, reachable *atomic.Bool, gone chan<- error) bus.PublishSpec {
	spec := pubSpec(topic, rec)
	spec.SubscriberReachable = func(bus.SubscriberInfo) bool { return reachable.Load() }
	spec.OnSubscriberUnheard = func(s bus.SubscriberInfo, _ time.Duration) { rec.add("unheard " + s.Key()) }
	spec.OnSubscriberHeard = func(s bus.SubscriberInfo, _ time.Duration) { rec.add("heard " + s.Key()) }
	spec.OnSubscriberGone = func(s bus.SubscriberInfo, err error) { rec.add("sub-" + s.Key()); gone <- err }
	return spec
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
}

// A subscriber whose node the bus loses by heartbeat (its process stopped:
// it cannot be heard, and is not dead) while the owner says its data plane
// is up is held, not gone: the owner is told it is unheard, and when the
// node is heard again and re-announces it, that it is heard, with no
// second OnSubscriber and no OnSubscriberGone. Held again, it is gone as
// soon as the owner's check says its data plane failed (ErrHoldFailed,
// wrapping ErrPeerLost); heard after that, it is a new subscriber.
func TestPublication_UnheardSubscriber_HeldWhileReachable(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a node's process past the heartbeat timeout, twice; skipped with -short")
	}
	ctx := context.Background()
	_, url := startNatsd(t, freePort(t))
	n := openNode(t, testConfig("pub", url))
	var rec recorder
	var reachable atomic.Bool
	reachable.Store(true)
	gone := make(chan error, 4)
	pub, err := n.Publish(ctx, unheardSpec("uh", &rec, &reachable, gone))
	require.NoError(t, err)
	victim := startProc(t, "bus-node", "-url", url, "-id", "victim", "-topic", "uh", "-sub", "s")
	t.Cleanup(func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) })
	require.Eventually(t, func() bool { return rec.count("sub+victim/s") == 1 }, eventually, tick, "events %v", rec.list())

	// (a starved bus may lose the victim, and hear it again, at other
	// times too: each step waits for one more of what it causes)
	unheard, heard := rec.count("unheard victim/s"), rec.count("heard victim/s")
	victim.signal(t, syscall.SIGSTOP)
	require.Eventually(t, func() bool { return rec.count("unheard victim/s") > unheard }, hbTimeout+eventually, tick, "events %v", rec.list())
	assert.Empty(t, pub.Subscribers(), "a held subscriber is not listed")
	victim.signal(t, syscall.SIGCONT)
	require.Eventually(t, func() bool { return rec.count("heard victim/s") > heard }, eventually, tick, "events %v", rec.list())
	assert.Equal(t, 1, rec.count("sub+victim/s"), "a subscriber heard again was reported anew: %v", rec.list())
	assert.Zero(t, rec.count("sub-victim/s"), "a held subscriber was reported gone: %v", rec.list())
	assert.Len(t, pub.Subscribers(), 1)

	unheard = rec.count("unheard victim/s")
	victim.signal(t, syscall.SIGSTOP)
	require.Eventually(t, func() bool { return rec.count("unheard victim/s") > unheard }, hbTimeout+eventually, tick, "events %v", rec.list())
	reachable.Store(false) // its queue pair failed
	select {
	case err := <-gone:
		assert.ErrorIs(t, err, bus.ErrPeerLost)
		assert.ErrorIs(t, err, bus.ErrHoldFailed)
	case <-time.After(eventually):
		t.Fatalf("a held subscriber whose data plane failed was not reported gone: %v", rec.list())
	}
	heard = rec.count("heard victim/s")
	victim.signal(t, syscall.SIGCONT)
	require.Eventually(t, func() bool { return rec.count("sub+victim/s") >= 2 }, eventually, tick,
		"a subscriber gone after its hold and heard again is a new one: %v", rec.list())
	assert.Equal(t, heard, rec.count("heard victim/s"), "a subscriber gone after its hold was taken for a held one")
	assert.Equal(t, rec.count("sub+victim/s")-1, rec.count("sub-victim/s"), "reported and gone do not alternate: %v", rec.list())
}

// A held subscriber is gone when its node's next incarnation is heard (it
// restarted: ErrPeerRestarted), and then reported anew; one held for the
// whole Config.UnheardHold is gone then (ErrHoldEnded), its data plane up
// or not; and with a negative UnheardHold a lost subscriber is gone at
// once, never held.
func TestPublication_UnheardSubscriber_RestartHoldEndAndNoHold(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a node's process and waits past the heartbeat timeout, twice; skipped with -short")
	}
	ctx := context.Background()
	_, url := startNatsd(t, freePort(t))
	var reachable atomic.Bool
	reachable.Store(true)
	held := openNode(t, testConfig("held", url)) // the default hold (30s)
	cShort := testConfig("short", url)
	cShort.UnheardHold = 300 * time.Millisecond
	short := openNode(t, cShort)
	cNone := testConfig("none", url)
	cNone.UnheardHold = -1
	none := openNode(t, cNone)
	var recHeld, recShort, recNone recorder
	goneHeld, goneShort, goneNone := make(chan error, 4), make(chan error, 4), make(chan error, 4)
	for _, x := range []struct {
		n    *bus.Node
		rec  *recorder
		gone chan error
	}{{held, &recHeld, goneHeld}, {short, &recShort, goneShort}, {none, &recNone, goneNone}} {
		spec := unheardSpec("uh2", x.rec, &reachable, x.gone)
		spec.ID = x.n.ID()
		_, err := x.n.Publish(ctx, spec)
		require.NoError(t, err)
	}
	victim := startProc(t, "bus-node", "-url", url, "-id", "victim", "-topic", "uh2", "-sub", "s")
	for _, rec := range []*recorder{&recHeld, &recShort, &recNone} {
		require.Eventually(t, func() bool { return rec.count("sub+victim/s") == 1 }, eventually, tick, "events %v", rec.list())
	}

	// (a starved bus may lose the victim, and hear it again, before it is
	// killed: the checks below count from here)
	unheardHeld, heardHeld, upHeld := recHeld.count("unheard victim/s"), recHeld.count("heard victim/s"), recHeld.count("sub+victim/s")
	unheardShort := recShort.count("unheard victim/s")
	victim.kill() // no goodbye
	wait := func(gone chan error, what string) error {
		t.Helper()
		select {
		case err := <-gone:
			return err
		case <-time.After(hbTimeout + eventually):
			t.Fatalf("%s: not reported gone", what)
			return nil
		}
	}
	err := wait(goneNone, "no hold")
	assert.ErrorIs(t, err, bus.ErrPeerLost)
	assert.NotErrorIs(t, err, bus.ErrHoldEnded)
	assert.NotErrorIs(t, err, bus.ErrHoldFailed)
	assert.Zero(t, recNone.count("unheard victim/s"), "held with a negative UnheardHold")
	err = wait(goneShort, "short hold")
	assert.ErrorIs(t, err, bus.ErrPeerLost)
	assert.ErrorIs(t, err, bus.ErrHoldEnded)
	assert.Greater(t, recShort.count("unheard victim/s"), unheardShort)
	require.Eventually(t, func() bool { return recHeld.count("unheard victim/s") > unheardHeld }, eventually, tick, "events %v", recHeld.list())
	select {
	case err := <-goneHeld:
		t.Fatalf("a subscriber held for 30s was reported gone at once: %v", err)
	default:
	}

	startProc(t, "bus-node", "-url", url, "-id", "victim", "-topic", "uh2", "-sub", "s") // its next incarnation
	assert.ErrorIs(t, wait(goneHeld, "restarted"), bus.ErrPeerRestarted)
	require.Eventually(t, func() bool { return recHeld.count("sub+victim/s") > upHeld }, eventually, tick,
		"the restarted subscriber was not reported: %v", recHeld.list())
	assert.Equal(t, heardHeld, recHeld.count("heard victim/s"), "another incarnation was taken for the held one")
}

func TestOpen_UnheardHold_TooShortIsRefused(t *testing.T) {
	cfg := testConfig("x", "")
	cfg.UnheardHold = 10 * time.Millisecond
	_, err := bus.Open(context.Background(), cfg)
	require.ErrorIs(t, err, bus.ErrInvalidConfig)
	assert.ErrorContains(t, err, "UnheardHold 10ms")
}
