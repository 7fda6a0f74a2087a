package bus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// Subscribers come and go on several nodes while a publisher on each of two
// topics watches; at the end every publication's view is exactly the live
// set, and every callback pair balanced.
func TestNode_Churn_PublisherViewsConvergeToLiveSubscribers(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var logs logBuf // for the failure message: peers that came and went
	cfg := func(id, url string) bus.Config {
		c := testConfig(id, url)
		// the product's heartbeat rate, not the other tests' 20 per second:
		// five nodes' heartbeats at that rate, each message's signature
		// checked by every node (about 20 times slower under -race), were
		// more than a starved node could read, and every announcement
		// queued behind them (the views lagged by more than eventually)
		c.HeartbeatInterval = bus.DefaultHeartbeatInterval
		c.Logger = loggerTo(&logs)
		return c
	}
	first := openNode(t, cfg("n0", ""))
	nodes := []*bus.Node{first}
	for i := 1; i < 5; i++ {
		nodes = append(nodes, openNode(t, cfg(fmt.Sprintf("n%d", i), first.ClientURL())))
	}
	topics := []string{"x", "y"}
	recs := map[string]*recorder{}
	pubs := map[string]*bus.Publication{}
	for i, topic := range topics {
		recs[topic] = &recorder{}
		p, err := nodes[i].Publish(ctx, pubSpec(topic, recs[topic]))
		require.NoError(t, err)
		pubs[topic] = p
	}
	live := map[string]*bus.Subscription{} // topic/node/id → subscription
	for op := range 60 {
		n := nodes[rng.IntN(len(nodes))]
		topic := topics[rng.IntN(len(topics))]
		id := fmt.Sprintf("s%d", rng.IntN(3))
		key := topic + "/" + n.ID() + "/" + id
		if s, ok := live[key]; ok {
			require.NoError(t, s.Close(), "op %d", op)
			delete(live, key)
			continue
		}
		s, err := n.Subscribe(ctx, subSpec(topic, id, &recorder{}))
		require.NoError(t, err, "op %d", op)
		live[key] = s
	}
	for _, topic := range topics {
		var want []string
		for key := range live {
			if t, rest, _ := cut(key); t == topic {
				want = append(want, rest)
			}
		}
		slices.Sort(want)
		if !converges(nodes, func() bool { return slices.Equal(keys(pubs[topic].Subscribers()), want) }) {
			// the view at the deadline, and what each node knows, so that a
			// CI log says why
			pn := nodes[slices.Index(topics, topic)]
			st := pn.Stats()
			var state []string
			for _, n := range nodes {
				state = append(state, bus.DiscoveryStateForTest(n, topic))
			}
			t.Fatalf("topic %s: view %v, %v after every node kept up with discovery (or %v in all), want %v; the publisher's node %s: ignored %v, rejected %v, discovery dropped %d, reconnects %d; "+
				"peers down %d (lost %d), peers up %d, stalls %d, behind %d, NATS async errors %d\n%s\nlog of peers down, stalls and backlogs:\n%s",
				topic, keys(pubs[topic].Subscribers()), eventually, churnMaxWait, want, pn.ID(), st.Ignored, st.Rejected, st.DiscoveryDropped, st.Reconnects,
				logs.count("bus: peer down"), logs.count("bus: peer down", "heartbeat timeout"), logs.count("bus: peer up"),
				logs.count("did not run for a while"), logs.count("behind on discovery"), logs.count("NATS async error"),
				strings.Join(state, "\n"), logs.lines("bus: peer down", "did not run for a while", "behind on discovery", "NATS"))
		}
		// every subscriber was reported gone as often as it came, but the live
		// ones once less (callbacks run just after the view changes: wait)
		balanced := func() error {
			for _, e := range recs[topic].list() {
				k := e[4:]
				ups, downs := recs[topic].count("sub+"+k), recs[topic].count("sub-"+k)
				if slices.Contains(want, k) && ups != downs+1 || !slices.Contains(want, k) && ups != downs {
					return fmt.Errorf("%s %s: %d up, %d down", topic, k, ups, downs)
				}
			}
			return nil
		}
		require.Eventually(t, func() bool { return balanced() == nil }, eventually, tick)
		assert.NoError(t, balanced())
	}
}

// churnMaxWait bounds converges.
const churnMaxWait = 2 * time.Minute

// converges waits until ok, or until eventually has passed since the last
// time a node was behind on its discovery messages (had not read all that
// had reached it a heartbeat interval before), and reports ok. The claim
// is that views converge once every node has read what was sent, not how
// fast a node reads: under -race on a starved CI host (every package at
// once on two cores) a node read ten messages a second, and the views
// lagged by more than any fixed deadline. Bounded by churnMaxWait.
func converges(nodes []*bus.Node, ok func() bool) bool {
	marks := make([]uint64, len(nodes))
	start := time.Now()
	deadline := start.Add(eventually)
	var looked time.Time
	for {
		if ok() {
			return true
		}
		now := time.Now()
		if now.Sub(looked) >= bus.DefaultHeartbeatInterval {
			looked = now
			for i, n := range nodes {
				if bus.DiscoveryBehindForTest(n, &marks[i]) {
					deadline = now.Add(eventually)
				}
			}
		}
		if now.After(deadline) || now.Sub(start) > churnMaxWait {
			return ok()
		}
		time.Sleep(tick)
	}
}

func keys(s []bus.SubscriberInfo) []string {
	out := []string{}
	for _, x := range s {
		out = append(out, x.Key())
	}
	return out
}

func cut(key string) (topic, rest string, ok bool) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

// lines returns the log lines that contain any of subs, at most the last 40.
func (l *logBuf) lines(subs ...string) string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	if len(out) > 40 {
		out = append([]string{fmt.Sprintf("(%d lines before these)", len(out)-40)}, out[len(out)-40:]...)
	}
	return strings.Join(out, "\n")
}
