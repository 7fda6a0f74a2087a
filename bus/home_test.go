package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestHome_ConcurrentFirstPublishers_ElectExactlyOneHome(t *testing.T) {
	cfg := testConfig // JetStream's Create decides: no timing window to widen on a loaded host
	a := openNode(t, cfg("n0", ""))
	nodes := []*bus.Node{a}
	for i := 1; i < 4; i++ {
		nodes = append(nodes, openNode(t, cfg(fmt.Sprintf("n%d", i), a.ClientURL())))
	}
	for _, n := range nodes {
		n := n
		require.Eventually(t, func() bool { return len(n.Peers()) == len(nodes)-1 }, eventually, tick)
	}
	for round := range 3 {
		topic := fmt.Sprintf("race%d", round)
		pubs := make([]*bus.Publication, len(nodes))
		errs := make([]error, len(nodes))
		var newHomes sync.Map
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rec recorder
				spec := pubSpec(topic, &rec)
				spec.NewHome = func(_ context.Context, topic string, _ uint64) ([]byte, error) {
					newHomes.Store(n.ID(), true)
					return []byte("home-on-" + n.ID()), nil
				}
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				pubs[i], errs[i] = n.Publish(ctx, spec)
			}()
		}
		close(start)
		wg.Wait()
		homes := map[string]int{}
		owners := 0
		for i, p := range pubs {
			require.NoError(t, errs[i], "node %d", i)
			h := p.Home()
			homes[h.Node.ID]++
			assert.Equal(t, "home-on-"+h.Node.ID, string(h.Descriptor))
			if p.IsHome() {
				owners++
			}
		}
		assert.Len(t, homes, 1, "round %d: every publisher agrees on one home: %v", round, homes)
		assert.Equal(t, 1, owners, "round %d", round)
		made := 0
		newHomes.Range(func(any, any) bool { made++; return true })
		assert.Equal(t, 1, made, "round %d: NewHome ran on one node only", round)
	}
}

func TestHome_ConfiguredNode_IsHomeEvenIfItPublishesLater(t *testing.T) {
	ctx := context.Background()
	homes := map[string]string{"cfg": "h"}
	ch := testConfig("h", "")
	ch.Homes = homes
	h := openNode(t, ch)
	co := testConfig("o", h.ClientURL())
	co.Homes = homes
	o := openNode(t, co)

	var rec recorder
	type result struct {
		p   *bus.Publication
		err error
	}
	done := make(chan result, 1)
	go func() {
		spec := pubSpec("cfg", &rec)
		spec.NewHome, spec.AcceptHome = nil, nil // may not become home
		cctx, cancel := context.WithTimeout(ctx, eventually)
		defer cancel()
		p, err := o.Publish(cctx, spec)
		done <- result{p, err}
	}()
	time.Sleep(300 * time.Millisecond) // o keeps asking for the named home
	ph, err := h.Publish(ctx, pubSpec("cfg", &rec))
	require.NoError(t, err)
	assert.True(t, ph.IsHome())
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, "h", r.p.Home().Node.ID)

	// a named home that never comes: a clear error when the context ends
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	co2 := testConfig("o2", h.ClientURL())
	co2.Homes = map[string]string{"nobody": "ghost"}
	o2 := openNode(t, co2)
	_, err = o2.Publish(cctx, pubSpec("nobody", &rec))
	require.ErrorIs(t, err, bus.ErrNoHome)
}

func TestHome_NoNewHome_FailsClearlyWhenItWouldBeHome(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	spec := pubSpec("t", &recorder{})
	spec.NewHome, spec.AcceptHome = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	_, err := a.Publish(ctx, spec)
	require.ErrorIs(t, err, bus.ErrInvalidConfig)
	// and nothing is left behind: a proper publisher becomes home
	p, err := a.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	assert.True(t, p.IsHome())
}

func TestHome_NewHomeFails_ErrorReturnedAndTopicFree(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	spec := pubSpec("t", &recorder{})
	boom := fmt.Errorf("no memory")
	spec.NewHome = func(context.Context, string, uint64) ([]byte, error) { return nil, boom }
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	_, err := a.Publish(ctx, spec)
	require.ErrorIs(t, err, boom)
	p, err := b.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	assert.True(t, p.IsHome())
}

func TestHome_HomeNodeCloses_OtherPublishersToldOnce(t *testing.T) {
	ctx := context.Background()
	srv := openNode(t, testConfig("srv", ""))
	slow := func(id string) bus.Config {
		c := testConfig(id, srv.ClientURL())
		c.HeartbeatTimeout = time.Minute // the goodbye, not a timeout, must do it
		return c
	}
	h := openNode(t, slow("h"))
	o := openNode(t, slow("o"))
	_, err := h.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	var rec recorder
	po, err := o.Publish(ctx, pubSpec("t", &rec))
	require.NoError(t, err)
	require.Equal(t, "h", po.Home().Node.ID)
	require.NoError(t, po.HomeErr())
	require.NoError(t, h.Close())
	require.Eventually(t, func() bool { return rec.count("homelost h") == 1 }, eventually, tick)
	require.ErrorIs(t, po.HomeErr(), bus.ErrHomeLost)
	time.Sleep(3 * hbInterval)
	assert.Equal(t, 1, rec.count("homelost h"))
}

func TestHome_FindHome_LocalRemoteAndNone(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	_, err := b.FindHome(ctx, "t")
	require.ErrorIs(t, err, bus.ErrNoHome)
	assert.Empty(t, b.Stats().Homes, "looking never claims")

	_, err = a.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	h, err := b.FindHome(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, "a", h.Node.ID)
	assert.False(t, h.Local)
	assert.Equal(t, []byte("home-of-t"), h.Descriptor)
	h, err = a.FindHome(ctx, "t")
	require.NoError(t, err)
	assert.True(t, h.Local)
	_, err = a.FindHome(ctx, "a..b")
	require.ErrorIs(t, err, bus.ErrInvalidConfig)
}

// HomeRecord reads the record as JetStream holds it: none before a home,
// the home's epoch once there is one, and a bad topic is refused.
func TestHome_HomeRecord_NoneThenTheHomesEpoch(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	_, ok, err := b.HomeRecord(ctx, "t")
	require.NoError(t, err)
	assert.False(t, ok, "no record before any home")

	po, err := a.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	hi, ok, err := b.HomeRecord(ctx, "t")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "a", hi.Node.ID)
	assert.Equal(t, po.Home().Epoch, hi.Epoch)
	assert.Zero(t, hi.End, "the home is open")
	_, _, err = b.HomeRecord(ctx, "a..b")
	require.ErrorIs(t, err, bus.ErrInvalidConfig)
}

func TestHome_ServerWithoutJetStream_PublishFailsNamingIt(t *testing.T) {
	_, url := startNatsd(t, freePort(t), "-nojs")
	n := openNode(t, testConfig("a", url))
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	_, err := n.Publish(ctx, pubSpec("t", &recorder{}))
	require.ErrorIs(t, err, bus.ErrNoJetStream)
	assert.Contains(t, err.Error(), url, "the error names the server")
	assert.Contains(t, err.Error(), "-js", "and says what to do")
	assert.Empty(t, n.Stats().Homes)
}

func TestHome_RestartedOnlyPublisher_StartsAboveTheReservation(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	var starts []uint64
	spec := func() bus.PublishSpec {
		s := pubSpec("t", &recorder{})
		s.NewHome = func(_ context.Context, _ string, start uint64) ([]byte, error) {
			starts = append(starts, start)
			return []byte("h"), nil
		}
		return s
	}
	p1, err := b.Publish(ctx, spec())
	require.NoError(t, err)
	e1 := p1.Home()
	require.NoError(t, p1.Close())
	p2, err := b.Publish(ctx, spec())
	require.NoError(t, err)
	e2 := p2.Home()
	require.Equal(t, []uint64{1, e1.Reserved}, starts, "the second home starts at the first one's reservation")
	assert.Greater(t, e2.Epoch, e1.Epoch)
	assert.Equal(t, e1.Reserved, e2.Start)
}

// A topic token may hold ':' (a KV key may not): such a topic is elected a
// home like any other, in the bucket under a key of its own, and a second
// publisher finds that home.
func TestHome_TopicWithColon_IsElectedAndFound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), eventually)
	defer cancel()
	a := openNode(t, testConfig("c0", ""))
	b := openNode(t, testConfig("c1", a.ClientURL()))
	var ra, rb recorder
	pa, err := a.Publish(ctx, pubSpec("eq:us.px", &ra))
	require.NoError(t, err)
	assert.Equal(t, "c0", pa.Home().Node.ID)
	pb, err := b.Publish(ctx, pubSpec("eq:us.px", &rb))
	require.NoError(t, err)
	assert.Equal(t, "c0", pb.Home().Node.ID, "the second publisher finds the first one's home")
	assert.Equal(t, pa.Home().Epoch, pb.Home().Epoch)
	pc, err := b.Publish(ctx, pubSpec("eq=us.px", &rb))
	assert.Error(t, err, "'=' is no topic character: it cannot alias eq:us.px's key")
	assert.Nil(t, pc)
}

// A closing home writes the counter it ended at into its record before it
// deletes its lease: a subscriber, which may have missed the end of the
// stream, is told where the epoch ended (HomeInfo.End); a home whose
// counter is unknown (EndCounter 0) or outside its epoch writes nothing.
func TestHome_ClosingHome_RecordsWhereItsEpochEnded(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	b := openNode(t, testConfig("b", a.ClientURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		topic   string
		counter uint64 // what EndCounter returns, as an offset from the epoch's start (0: unknown)
		want    bool
	}{{"ended", 42, true}, {"unknown", 0, false}} {
		var rec recorder
		var mu sync.Mutex
		var infos []bus.HomeInfo
		ss := subSpec(tc.topic, "s", &rec)
		ss.OnHome = func(hi bus.HomeInfo) {
			mu.Lock()
			infos = append(infos, hi)
			mu.Unlock()
		}
		_, err := b.Subscribe(ctx, ss)
		require.NoError(t, err)
		spec := pubSpec(tc.topic, &rec)
		var start uint64
		spec.NewHome = func(_ context.Context, topic string, s uint64) ([]byte, error) {
			start = s
			return []byte("home-of-" + topic), nil
		}
		spec.EndCounter = func() uint64 {
			if tc.counter == 0 {
				return 0
			}
			return start + tc.counter
		}
		p, err := a.Publish(ctx, spec)
		require.NoError(t, err)
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(infos) > 0 }, eventually, tick, "%s: no home record", tc.topic)
		require.NoError(t, p.Close())
		if !tc.want {
			// a next home's record comes after any end the closing one
			// wrote (it writes before it deletes the lease the next takes)
			epoch := p.Home().Epoch
			p2, err := a.Publish(ctx, pubSpec(tc.topic, &rec))
			require.NoError(t, err)
			defer p2.Close()
			require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return infos[len(infos)-1].Epoch > epoch }, eventually, tick)
			mu.Lock()
			for _, hi := range infos {
				assert.Zero(t, hi.End, "%s: an end was recorded: %+v", tc.topic, hi)
			}
			mu.Unlock()
			continue
		}
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return infos[len(infos)-1].End != 0
		}, eventually, tick, "%s: the record never said where the epoch ended", tc.topic)
		mu.Lock()
		last := infos[len(infos)-1]
		mu.Unlock()
		assert.Equal(t, start+tc.counter, last.End)
		assert.Equal(t, a.ID(), last.Node.ID)
		assert.LessOrEqual(t, last.End, last.Reserved)
	}
}
