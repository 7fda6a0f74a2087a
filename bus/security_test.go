package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// Forged heartbeats, goodbyes, home assertions, withdrawals and claims, and
// replays of real messages, sent by an outsider that holds NATS access and
// a key of its own but not the victims' keys nor rights on the topic:
// nothing changes, each is counted, and logged once per peer and kind.
func TestSecurity_ForgedControlMessages_ChangeNothing(t *testing.T) {
	ctx := context.Background()
	kH, pH := newKey(t)
	kO, pO := newKey(t)
	kS, pS := newKey(t)
	kEvil, _ := newKey(t)
	auth := bus.Authorization{
		Publish:   map[string][]string{"T": {pH, pO}, "U": {pO}},
		Subscribe: map[string][]string{"T": {pS}},
	}
	var logs logBuf
	cfg := func(id, url string) bus.Config {
		c := testConfig(id, url)
		c.HeartbeatTimeout = time.Minute // only a message, never a timeout, may drop a peer here
		c.LeaseTTL = time.Minute         // and only a message, never a starved lease renewal (-race, load), may move a home
		c.Authorization = auth
		c.Logger = loggerTo(&logs)
		return c
	}
	ch := cfg("h", "")
	ch.Key = kH
	h := openNode(t, ch)
	co := cfg("o", h.ClientURL())
	co.Key = kO
	o := openNode(t, co)
	cs := cfg("s", h.ClientURL())
	cs.Key = kS
	s := openNode(t, cs)

	raw, err := nats.Connect(h.ClientURL())
	require.NoError(t, err)
	defer raw.Close()
	var mu sync.Mutex
	sniffed := map[string][]byte{}
	_, err = raw.Subscribe("tickbus.d.>", func(m *nats.Msg) {
		mu.Lock()
		sniffed[m.Subject] = m.Data // the latest of each subject
		mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, raw.Flush())

	var recH, recO, recS recorder
	_, err = h.Publish(ctx, pubSpec("T", &recH))
	require.NoError(t, err)
	po, err := o.Publish(ctx, pubSpec("T", &recO))
	require.NoError(t, err)
	require.Equal(t, "h", po.Home().Node.ID)
	_, err = s.Subscribe(ctx, subSpec("T", "s", &recS))
	require.NoError(t, err)
	s2, err := s.Subscribe(ctx, subSpec("T", "s2", &recS))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return recH.count("sub+s/s") == 1 && recH.count("sub+s/s2") == 1 && recO.count("sub+s/s") == 1 && recS.count("pub+o/o") == 2 // s and s2
	}, eventually, tick)
	require.NoError(t, s2.Close()) // withdrawn: its sniffed announcement is replayed below
	// both publishers heard the real withdrawal before the snapshot below
	// (o heard it after it once, under -race: "a forged message changed what
	// the nodes know")
	require.Eventually(t, func() bool { return recH.count("sub-s/s2") == 1 && recO.count("sub-s/s2") == 1 }, eventually, tick)
	// a heartbeat to replay: one per interval (a "who" no longer brings one)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := sniffed["tickbus.d.hb"]
		return ok
	}, eventually, tick)
	mu.Lock()
	replays := map[string][]byte{}
	for subj, b := range sniffed {
		replays[subj] = b
	}
	mu.Unlock()
	require.Contains(t, replays, "tickbus.d.sub.T")
	require.Contains(t, replays, "tickbus.d.hb")

	before := map[string][]string{"h": recH.list(), "o": recO.list(), "s": recS.list()}
	incS, incH := s.Info().Incarnation, h.Info().Incarnation
	msg := func(kind, id string, inc uint64, topic string) string {
		m := fmt.Sprintf(`{"v":1,"kind":%q,"node":{"id":%q,"host":"host-%s","inc":%d}`, kind, id, id, inc)
		if topic != "" {
			m += fmt.Sprintf(`,"topic":%q`, topic)
		}
		return m + "}"
	}
	type forgery struct{ subj, msg string }
	forgeries := []forgery{
		{"tickbus.d.hb", msg("hb", "s", incS+1, "")},           // a "restart" of s: would drop its subscriber
		{"tickbus.d.bye", msg("bye", "s", incS, "")},           // s leaves
		{"tickbus.d.bye", msg("bye", "h", incH, "")},           // the home leaves: o would lose it
		{"tickbus.d.home.T", msg("unhome", "h", incH, "T")},    // the home stops
		{"tickbus.d.home.T", msg("home", "aaa-evil", 1, "T")},  // a second home
		{"tickbus.d.home.T", msg("claim", "aaa-evil", 1, "T")}, // a claim on a topic with a home
		{"tickbus.d.home.U", msg("home", "aaa-evil", 1, "U")},  // during o's claim of U below
		{"tickbus.d.home.U", msg("claim", "aaa-evil", 1, "U")}, // a smaller id than o: o would yield
		{"tickbus.d.pub.T", fmt.Sprintf( // o withdraws its publisher
			`{"v":1,"kind":"unpub","node":{"id":"o","host":"host-o","inc":%d},"topic":"T","id":"o"}`, o.Info().Incarnation)},
	}

	// o claims U while the forgeries fly: it must still become U's home
	var wg sync.WaitGroup
	var pu *bus.Publication
	var puErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		pu, puErr = o.Publish(ctx, pubSpec("U", &recorder{}))
	}()
	const reps = 20
	for range reps {
		for _, f := range forgeries {
			require.NoError(t, raw.Publish(f.subj, []byte(f.msg)))                  // unsigned
			require.NoError(t, raw.Publish(f.subj, forge(t, kEvil, f.subj, f.msg))) // evil's key, the victim's id
			require.NoError(t, raw.Publish(f.subj, forge(t, nil, f.subj, f.msg)))   // mis-signed
		}
		for subj, b := range replays {
			require.NoError(t, raw.Publish(subj, b)) // real messages, again
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	require.NoError(t, puErr)
	require.NoError(t, raw.Flush())
	// every forgery and replay reached both nodes and was refused (a loaded
	// machine, or the race detector, makes each signature check slow)
	for _, n := range []*bus.Node{h, o} {
		require.Eventually(t, func() bool {
			st := n.Stats()
			for _, k := range []string{"hb", "bye", "home", "pub", "sub"} {
				if st.Rejected[k] < reps {
					return false
				}
			}
			return true
		}, 4*eventually, tick, "node %s", n.ID())
	}
	time.Sleep(5 * hbInterval)

	assert.Equal(t, "o", pu.Home().Node.ID, "o yielded U to a forged claim or home")
	assert.Contains(t, o.Stats().Homes, "U")
	assert.Equal(t, before, map[string][]string{"h": recH.list(), "o": recO.list(), "s": recS.list()}, "a forged message changed what the nodes know")
	assert.NoError(t, po.HomeErr())
	assert.Equal(t, []string{"o", "s"}, peerIDs(h))
	assert.Equal(t, incS, h.Peers()[1].Incarnation)
	assert.Len(t, po.Subscribers(), 1)

	// logged once per peer, kind and class, not once per message
	for _, k := range []string{"hb", "bye", "home", "pub", "sub"} {
		for _, class := range []string{"unauthenticated", "identity", "replayed", "forbidden"} {
			for _, peer := range []string{"s", "h", "o", "aaa-evil", "unsigned"} {
				assert.LessOrEqual(t, logs.count(`"node":"h"`, "ignored bad message", `"kind":"`+k+`"`, `"class":"`+class+`"`, `"peer":"`+peer+`"`), 1,
					"kind %s class %s peer %s", k, class, peer)
			}
		}
	}
	assert.Positive(t, logs.count(`"class":"identity"`))
	assert.Positive(t, logs.count(`"class":"replayed"`))
	assert.Positive(t, logs.count(`"class":"forbidden"`))
}
