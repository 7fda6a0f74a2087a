package bus_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
