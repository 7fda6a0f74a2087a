package bus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// sentBy returns the kind of a discovery message (as it travels, in its
// envelope) if node sent it, or "".
func sentBy(node string, data []byte) string {
	var env struct {
		Msg []byte `json:"msg"`
	}
	var m struct {
		Kind string `json:"kind"`
		Node struct {
			ID string `json:"id"`
		} `json:"node"`
	}
	if json.Unmarshal(data, &env) != nil || json.Unmarshal(env.Msg, &m) != nil || m.Node.ID != node {
		return ""
	}
	return m.Kind
}

// A who for one topic and one kind (a new subscriber asks for the topic's
// publishers, a new publisher for its subscribers) is answered with that
// kind only: a node with a subscriber and a publisher of the topic
// re-announces the one asked for. (Every node re-announcing everything of
// the topic at every join made churn cost a message per subscriber per
// node, and starved nodes fell seconds behind on discovery.) The node's
// answers travel in order on its connection, and it would announce its
// subscribers before its publishers: asked for publishers, subscribers,
// publishers, it answers pub, sub, pub and nothing else.
func TestDiscovery_WhoForOneKind_OnlyThatKindReannounces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := openNode(t, testConfig("wa", ""))
	nc, err := nats.Connect(a.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	kinds := make(chan string, 64)
	sub, err := nc.Subscribe(bus.DefaultPrefix+".d.>", func(m *nats.Msg) {
		if k := sentBy("wa", m.Data); k == "sub" || k == "pub" {
			kinds <- k
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	require.NoError(t, nc.Flush())
	next := func() string {
		select {
		case k := <-kinds:
			return k
		case <-ctx.Done():
			return "(none: " + ctx.Err().Error() + ")"
		}
	}

	_, err = a.Subscribe(ctx, subSpec("t", "s", &recorder{}))
	require.NoError(t, err)
	require.Equal(t, "sub", next(), "the subscriber's own announcement")
	_, err = a.Publish(ctx, pubSpec("t", &recorder{}))
	require.NoError(t, err)
	require.Equal(t, "pub", next(), "the publisher's own announcement")

	kp, _ := newKey(t)
	subj := bus.DefaultPrefix + ".d.who"
	for _, target := range []string{"publisher", "subscriber", "publisher"} {
		msg := `{"v":1,"kind":"who","node":{"id":"q","host":"hq","inc":1},"topic":"t","target":"` + target + `"}`
		require.NoError(t, nc.Publish(subj, forge(t, kp, subj, msg)))
	}
	require.NoError(t, nc.Flush())
	got := []string{next(), next(), next()}
	assert.Equal(t, []string{"pub", "sub", "pub"}, got, "one answer of the kind asked for, per who")

	// a who of no kind (as older nodes send) still gets everything
	msg := `{"v":1,"kind":"who","node":{"id":"q","host":"hq","inc":1},"topic":"t"}`
	require.NoError(t, nc.Publish(subj, forge(t, kp, subj, msg)))
	assert.Equal(t, []string{"sub", "pub"}, []string{next(), next()})
	assert.Zero(t, a.Stats().Ignored["who"], "every who was admitted: %v", a.Stats().Ignored)
}

// After a partition heals, one node often hears the other seconds before
// it is heard. The node that hears first asks the other alone to
// re-announce, and that who is lost; when the other hears it at last and
// asks in turn, the first asks once more (whoBack), unless the peer's
// announcements came meanwhile: here peer q's first message (a heartbeat)
// makes wa ask "who q"; q announces nothing and asks "who wa"; wa asks
// "who q" again, once. Peer r announces a publisher after wa's who, so
// r's "who wa" gets no second question.
func TestDiscovery_PeerThatHeardUsLate_IsAskedOnceMore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := openNode(t, testConfig("wa", ""))
	nc, err := nats.Connect(a.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	asked := make(chan string, 64)
	sub, err := nc.Subscribe(bus.DefaultPrefix+".d.who", func(m *nats.Msg) {
		var env struct {
			Msg []byte `json:"msg"`
		}
		var w struct {
			ID string `json:"id"`
		}
		// wa's own who to everyone (ID "", sent as it came up) may reach
		// this subscription late, on a slow run; it asks no peer alone
		if sentBy("wa", m.Data) == "who" && json.Unmarshal(m.Data, &env) == nil && json.Unmarshal(env.Msg, &w) == nil && w.ID != "" {
			asked <- w.ID
		}
	})
	require.NoError(t, err)
	defer sub.Unsubscribe()
	require.NoError(t, nc.Flush())
	next := func() string {
		select {
		case id := <-asked:
			return id
		case <-ctx.Done():
			return "(none: " + ctx.Err().Error() + ")"
		}
	}
	none := func(why string) {
		select {
		case id := <-asked:
			t.Errorf("%s: wa asked %q", why, id)
		case <-time.After(500 * time.Millisecond):
		}
	}
	send := func(kp nkeys.KeyPair, subj, msg string) {
		require.NoError(t, nc.Publish(subj, forge(t, kp, subj, msg)))
		require.NoError(t, nc.Flush())
	}
	hb, who := bus.DefaultPrefix+".d.hb", bus.DefaultPrefix+".d.who"

	kq, _ := newKey(t)
	send(kq, hb, `{"v":1,"kind":"hb","node":{"id":"q","host":"hq","inc":1}}`)
	require.Equal(t, "q", next(), "a new peer is asked to re-announce (ignored: %v)", a.Stats().Ignored)
	send(kq, who, `{"v":1,"kind":"who","node":{"id":"q","host":"hq","inc":1},"id":"wa"}`)
	require.Equal(t, "q", next(), "a peer that asks us after we asked it, with nothing heard between, is asked again")
	send(kq, who, `{"v":1,"kind":"who","node":{"id":"q","host":"hq","inc":1},"id":"wa"}`)
	none("asked again only once")

	kr, _ := newKey(t)
	send(kr, hb, `{"v":1,"kind":"hb","node":{"id":"r","host":"hr","inc":1}}`)
	require.Equal(t, "r", next())
	send(kr, bus.DefaultPrefix+".d.pub.T", `{"v":1,"kind":"pub","node":{"id":"r","host":"hr","inc":1},"topic":"T","id":"p"}`)
	send(kr, who, `{"v":1,"kind":"who","node":{"id":"r","host":"hr","inc":1},"id":"wa"}`)
	none("a peer whose announcement came is not asked again")
	assert.Empty(t, a.Stats().Ignored, "every message was admitted: %v", a.Stats().Ignored)
}
