package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/ring"
)

// loopTopo is one topic in one process: home, writer and a ring on one shm
// device, joined by loopback queue pairs as the bench joins processes.
type loopTopo struct {
	tx     *tbTx
	rx     *tbRx
	home   ring.HomeDesc
	ring   ring.RingDesc
	credit ring.CreditDesc
}

func newLoopTopo(t testing.TB, mode ring.Mode) loopTopo {
	t.Helper()
	dev, err := shm.Open(shm.Config{HostID: tbHostID})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, dev.Close()) })
	cq := func() rdma.CompletionQueue {
		c, err := dev.CreateCQ(4096)
		require.NoError(t, err)
		return c
	}
	pair := func(a, b rdma.CompletionQueue) (rdma.QueuePair, rdma.QueuePair) {
		qa, err := newQP(dev, a)
		require.NoError(t, err)
		qb, err := newQP(dev, b)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, qa.Connect(ctx, qb.LocalEndpoint()))
		require.NoError(t, qb.Connect(ctx, qa.LocalEndpoint()))
		return qa, qb
	}
	home, err := ring.NewHome(dev, ring.HomeConfig{SlotSize: tbSlotSize(64)})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, home.Close()) })
	hcq, wcq, rcq := cq(), cq(), cq()
	wq, _ := pair(wcq, hcq)
	w, err := ring.NewWriter(ring.WriterConfig{Device: dev, CQ: wcq, HomeQP: wq, Home: home.Desc(), Idle: rdma.Yield{}, Timeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	r, err := ring.NewRing(dev, ring.RingConfig{SlotSize: tbSlotSize(64), Mode: mode, CQ: rcq, MaxBatch: tbReadBatch})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close()) })
	tq, rq := pair(wcq, rcq)
	cd, err := w.AddTarget(ring.Target{ID: 1, QP: tq, Ring: r.Desc()})
	require.NoError(t, err)
	if mode == ring.Reliable {
		require.NoError(t, r.Reader().AddCredit(rq, cd))
	}
	return loopTopo{
		home: home.Desc(), ring: r.Desc(), credit: cd,
		tx: newTBTx(w, 64, 64),
		rx: newTBRx(r.Reader(), rdma.Yield{}),
	}
}

func TestTickbusPorts_DeliverEveryTickInOrder(t *testing.T) {
	for _, mode := range []ring.Mode{ring.Reliable, ring.Lossy} {
		tp := newLoopTopo(t, mode)
		deadline := nanotime() + int64(10*time.Second)
		for i := int64(0); i < 100; i++ {
			require.NoError(t, tp.tx.send(i, 1000+i, deadline))
		}
		require.NoError(t, tp.tx.sendBatch(100, 16, 7, deadline))
		for i := int64(0); i < 116; i++ {
			seq, ts, err := tp.rx.next(deadline)
			require.NoError(t, err)
			assert.Equal(t, i+1, seq, "the topic's sequence, from 1")
			if i < 100 {
				assert.Equal(t, 1000+i, ts)
			} else {
				assert.Equal(t, int64(7), ts)
			}
		}
		_, _, err := tp.rx.next(nanotime() + int64(20*time.Millisecond))
		assert.ErrorIs(t, err, ErrDeadline)
	}
}

func TestTickbusPorts_HotPath_DoesNotAllocate(t *testing.T) {
	tp := newLoopTopo(t, ring.Reliable)
	deadline := nanotime() + int64(30*time.Second)
	h := newHist()
	var i int64
	allocs := testing.AllocsPerRun(1000, func() {
		if err := tp.tx.send(i, nanotime(), deadline); err != nil {
			panic(err)
		}
		_, ts, err := tp.rx.next(deadline)
		if err != nil {
			panic(err)
		}
		record(h, nanotime()-ts)
		i++
	})
	assert.Zero(t, allocs)
}

func TestDecodeWire_AcceptsWhatTheBenchWrites(t *testing.T) {
	ep, err := rdma.Endpoint{Provider: rdma.ProviderShm, HostID: "h", QPN: 3, Addr: "@x"}.MarshalBinary()
	require.NoError(t, err)
	tp := newLoopTopo(t, ring.Reliable)
	rd, err := tp.ring.MarshalBinary()
	require.NoError(t, err)
	hd, err := tp.home.MarshalBinary()
	require.NoError(t, err)
	cd, err := tp.credit.MarshalBinary()
	require.NoError(t, err)
	var m tbMade
	require.NoError(t, decodeWire([]byte(mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0, Ring: rd, EPs: [][]byte{ep}}}})), &m))
	assert.Equal(t, rd, m.Topics[0].Ring)
	var ww tbWriterWiring
	require.NoError(t, decodeWire([]byte(mustJSON(tbWriterWiring{Topics: []tbWriterTopic{{Topic: 0, Home: hd, HomeEP: ep, Rings: [][]byte{rd}, EPs: [][]byte{ep}}}})), &ww))
	var rw tbReaderWiring
	require.NoError(t, decodeWire([]byte(mustJSON(tbReaderWiring{Topics: []tbReaderTopic{{Topic: 0, EPs: [][]byte{ep}, Credits: [][]byte{cd}}}})), &rw))
	// The same credit for two writers is one short: refused.
	assert.Error(t, decodeWire([]byte(mustJSON(tbReaderWiring{Topics: []tbReaderTopic{{Topic: 0, EPs: [][]byte{ep, ep}, Credits: [][]byte{cd}}}})), &rw))
	// Rings and endpoints must pair up.
	assert.Error(t, decodeWire([]byte(mustJSON(tbWriterWiring{Topics: []tbWriterTopic{{Topic: 0, Home: hd, HomeEP: ep, Rings: [][]byte{rd}}}})), &ww))
}

func TestDecodeWire_RejectsMalformedWiring(t *testing.T) {
	ep, err := rdma.Endpoint{Provider: rdma.ProviderShm, HostID: "h", QPN: 3, Addr: "@x"}.MarshalBinary()
	require.NoError(t, err)
	many := make([][]byte, maxWirePeers+1)
	for i := range many {
		many[i] = ep
	}
	for name, c := range map[string]struct {
		line string
		v    any
	}{
		"not json":          {`{`, &tbMade{}},
		"bad topic":         {mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 7, HomeEP: ep}}}), &tbMade{}},
		"neither side":      {mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0}}}), &tbMade{}},
		"garbage endpoint":  {mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0, HomeEP: []byte{1, 2, 3}}}}), &tbMade{}},
		"too many peers":    {mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0, HomeEP: ep, EPs: many}}}), &tbMade{}},
		"garbage ring":      {mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0, Ring: []byte("R"), EPs: [][]byte{ep}}}}), &tbMade{}},
		"garbage home":      {mustJSON(tbWriterWiring{Topics: []tbWriterTopic{{Topic: 0, Home: []byte{9}, HomeEP: ep}}}), &tbWriterWiring{}},
		"garbage credit":    {mustJSON(tbCredits{Topics: []tbCreditsTopic{{Topic: 0, Credits: [][]byte{{1}}}}}), &tbCredits{}},
		"reader bad ep":     {mustJSON(tbReaderWiring{Topics: []tbReaderTopic{{Topic: 1, EPs: [][]byte{{0}}}}}), &tbReaderWiring{}},
		"wrong json type":   {`{"topics":"x"}`, &tbCredits{}},
		"unknown wire type": {`{}`, &struct{}{}},
	} {
		assert.Error(t, decodeWire([]byte(c.line), c.v), name)
	}
}

func FuzzDecodeWire(f *testing.F) {
	ep, _ := rdma.Endpoint{Provider: rdma.ProviderShm, HostID: "h", QPN: 3, Addr: "@x"}.MarshalBinary()
	f.Add([]byte(mustJSON(tbMade{Topics: []tbMadeTopic{{Topic: 0, HomeEP: ep, EPs: [][]byte{ep}}}})))
	f.Add([]byte(mustJSON(tbReaderWiring{Topics: []tbReaderTopic{{Topic: 1, EPs: [][]byte{ep}}}})))
	f.Add([]byte(`{"topics":[{"topic":0,"credits":["AAAA"]}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, v := range []any{&tbMade{}, &tbWriterWiring{}, &tbCredits{}, &tbReaderWiring{}} {
			_ = decodeWire(line, v) // must not panic; errors are fine
		}
	})
}
