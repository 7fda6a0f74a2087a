package bus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

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
		if !assert.Eventually(t, func() bool { return slices.Equal(keys(pubs[topic].Subscribers()), want) }, eventually, tick) {
			// the view at the deadline (Eventually's message is made before it waits)
			st := nodes[slices.Index(topics, topic)].Stats()
			t.Fatalf("topic %s: view %v after %v, want %v; the publisher's node: %d peers, ignored %v, rejected %v, discovery dropped %d; "+
				"peers down %d (lost %d), peers up %d, NATS async errors %d",
				topic, keys(pubs[topic].Subscribers()), eventually, want, len(nodes[slices.Index(topics, topic)].Peers()),
				st.Ignored, st.Rejected, st.DiscoveryDropped, logs.count("bus: peer down"), logs.count("bus: peer down", "heartbeat timeout"),
				logs.count("bus: peer up"), logs.count("NATS async error"))
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
