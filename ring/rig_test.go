package ring

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

// forceGeneric runs every topo's writers on the work-request path
// (WriterConfig.Generic): TICKBUS_RING_GENERIC=1 go test ./ring/ runs the
// ring tests on it, as a plain go test runs them on the direct path.
var forceGeneric = os.Getenv("TICKBUS_RING_GENERIC") == "1"

// openDev opens a real shm device for one test.
func openDev(t testing.TB) *shm.Device {
	t.Helper()
	d, err := shm.Open(shm.Config{HostID: "test-host"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newCQ(t testing.TB, d rdma.Device, depth int) rdma.CompletionQueue {
	t.Helper()
	cq, err := d.CreateCQ(depth)
	require.NoError(t, err)
	return cq
}

// qpPair makes a QP on a (send CQ acq) and one on b (send CQ bcq) and
// connects them both ways.
func qpPair(t testing.TB, a rdma.Device, acq rdma.CompletionQueue, b rdma.Device, bcq rdma.CompletionQueue) (rdma.QueuePair, rdma.QueuePair) {
	t.Helper()
	return qpPairDepth(t, a, acq, b, bcq, 256)
}

// qpPairDepth is qpPair with a's send queue depth deep (b's 256).
func qpPairDepth(t testing.TB, a rdma.Device, acq rdma.CompletionQueue, b rdma.Device, bcq rdma.CompletionQueue, depth int) (rdma.QueuePair, rdma.QueuePair) {
	t.Helper()
	qa, err := a.CreateQP(rdma.QPConfig{SendCQ: acq, RecvCQ: acq, SendDepth: depth})
	require.NoError(t, err)
	qb, err := b.CreateQP(rdma.QPConfig{SendCQ: bcq, RecvCQ: bcq, SendDepth: 256})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, qa.Connect(ctx, qb.LocalEndpoint()))
	require.NoError(t, qb.Connect(ctx, qa.LocalEndpoint()))
	return qa, qb
}

// topo is one process's topic: a home, one writer, rings, all on one shm
// device, connected through loopback QPs as they would be across
// processes.
type topo struct {
	t     testing.TB
	dev   rdma.Device
	home  *Home
	homeQ rdma.CompletionQueue // the home side's CQ (unused by ring)
	wcq   rdma.CompletionQueue
	w     *Writer
	rings []*Ring
	rcq   rdma.CompletionQueue
}

func newTopo(t testing.TB, hc HomeConfig, wc WriterConfig) *topo {
	t.Helper()
	return newTopoOn(t, openDev(t), hc, wc)
}

// newTopoOn is newTopo on any provider's device.
func newTopoOn(t testing.TB, dev rdma.Device, hc HomeConfig, wc WriterConfig) *topo {
	t.Helper()
	tp := &topo{t: t, dev: dev}
	var err error
	tp.home, err = NewHome(tp.dev, hc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.home.Close() })
	tp.homeQ = newCQ(t, tp.dev, 4096)
	tp.wcq = newCQ(t, tp.dev, 4096)
	tp.rcq = newCQ(t, tp.dev, 4096)
	tp.w = tp.addWriter(wc)
	return tp
}

// addWriter makes one more writer on the topic, with its own CQ.
func (tp *topo) addWriter(wc WriterConfig) *Writer {
	t := tp.t
	t.Helper()
	cq := tp.wcq
	if tp.w != nil {
		cq = newCQ(t, tp.dev, 4096)
	}
	hq, _ := qpPair(t, tp.dev, cq, tp.dev, tp.homeQ)
	wc.Device, wc.CQ, wc.HomeQP, wc.Home = tp.dev, cq, hq, tp.home.Desc()
	if wc.SoloHome == soloHere {
		wc.SoloHome = tp.home
	}
	if wc.Timeout == 0 {
		wc.Timeout = 2 * time.Second
	}
	wc.Generic = wc.Generic || forceGeneric
	w, err := NewWriter(wc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	for i, r := range tp.rings {
		tp.connect(w, uint64(i), r)
	}
	return w
}

// soloHere as WriterConfig.SoloHome asks addWriter for the topo's home.
var soloHere = &Home{}

// addRing makes a subscriber ring and adds it to every writer given.
func (tp *topo) addRing(rc RingConfig, ws ...*Writer) *Ring {
	t := tp.t
	t.Helper()
	if rc.CQ == nil {
		rc.CQ = tp.rcq
	}
	r, err := NewRing(tp.dev, rc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	tp.rings = append(tp.rings, r)
	if len(ws) == 0 {
		ws = []*Writer{tp.w}
	}
	for _, w := range ws {
		tp.connect(w, uint64(len(tp.rings)-1), r)
	}
	return r
}

func (tp *topo) connect(w *Writer, id uint64, r *Ring) {
	t := tp.t
	wq, rq := qpPair(t, tp.dev, w.cq, tp.dev, r.reader.cq)
	cd, err := w.AddTarget(Target{ID: id, QP: wq, Ring: r.Desc()})
	require.NoError(t, err)
	if r.Desc().Mode == Reliable {
		require.NoError(t, r.Reader().AddCredit(rq, cd))
	}
}

// collector is a Handler that keeps everything (tests only: it allocates).
type collector struct {
	ticks  []Tick
	events []Event
}

func (c *collector) OnTicks(ts []Tick) {
	for _, t := range ts {
		t.Payload = append([]byte{}, t.Payload...)
		c.ticks = append(c.ticks, t)
	}
}

func (c *collector) OnEvent(ev Event) { c.events = append(c.events, ev) }

// pollUntil polls r until cond or the deadline.
func pollUntil(t testing.TB, r *Reader, h Handler, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var idle rdma.Yield
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 10s (reader at %d)", r.Next())
		}
		idle.Idle(r.Poll(h))
	}
}
