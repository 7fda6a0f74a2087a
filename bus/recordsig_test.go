package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

// Home records written straight into the bucket by a plain NATS client:
// unsigned, mis-signed, signed for another topic, signed by an identity
// without the topic's rights, or naming the home's node id under another
// publisher's key. Nothing changes for the home or the subscriber, and
// each is refused and counted. A record signed with the home's own key is
// taken, so the check is not refusing everything.
func TestSecurity_ForgedHomeRecords_ChangeNothing(t *testing.T) {
	ctx := context.Background()
	kH, pH := newKey(t)
	kO, pO := newKey(t)
	kS, pS := newKey(t)
	kEvil, _ := newKey(t)
	auth := bus.Authorization{
		Publish:   map[string][]string{"T": {pH, pO}},
		Subscribe: map[string][]string{"T": {pS}},
	}
	var logs logBuf
	cfg := func(id, url string) bus.Config {
		c := testConfig(id, url)
		c.HeartbeatTimeout = time.Minute
		c.Authorization = auth
		c.Logger = loggerTo(&logs)
		return c
	}
	ch := cfg("h", "")
	ch.Key = kH
	h := openNode(t, ch)
	cs := cfg("s", h.ClientURL())
	cs.Key = kS
	s := openNode(t, cs)

	var mu sync.Mutex
	var homes []bus.HomeInfo
	var recH, recS recorder
	spec := subSpec("T", "s", &recS)
	spec.OnHome = func(hi bus.HomeInfo) {
		mu.Lock()
		homes = append(homes, hi)
		mu.Unlock()
	}
	_, err := s.Subscribe(ctx, spec)
	require.NoError(t, err)
	p, err := h.Publish(ctx, pubSpec("T", &recH))
	require.NoError(t, err)
	epoch := p.Home().Epoch
	lastHome := func() bus.HomeInfo {
		mu.Lock()
		defer mu.Unlock()
		if len(homes) == 0 {
			return bus.HomeInfo{}
		}
		return homes[len(homes)-1]
	}
	require.Eventually(t, func() bool {
		hi := lastHome()
		return hi.Node.ID == "h" && hi.Epoch == epoch && len(hi.Descriptor) > 0 && recS.count("pub+h/h") == 1
	}, eventually, tick)

	raw, err := nats.Connect(h.ClientURL())
	require.NoError(t, err)
	defer raw.Close()
	record := func(node string, ep uint64) []byte {
		b, err := json.Marshal(map[string]any{"v": 1, "epoch": ep, "node": node, "host": "host-" + node, "inc": 1,
			"start": 1, "reserved": 1 << 40, "desc": []byte("evil-home")})
		require.NoError(t, err)
		return b
	}
	const subj = "kv.tickbus_seqs.T"
	signed := func(b []byte, err error) []byte {
		require.NoError(t, err)
		return b
	}
	misSigned := signed(bus.SealForTest(kH, subj, record("h", epoch+100)))
	var env map[string]any
	require.NoError(t, json.Unmarshal(misSigned, &env))
	env["msg"] = record("h", epoch+101) // the message changed after signing
	misSigned, err = json.Marshal(env)
	require.NoError(t, err)
	forgeries := map[string][]byte{
		"unsigned":         record("aaa-evil", epoch+100),
		"garbage":          []byte("{not json"),
		"mis-signed":       misSigned,
		"other topic":      signed(bus.SealForTest(kH, "kv.tickbus_seqs.U", record("h", epoch+100))),
		"no rights":        signed(bus.SealForTest(kEvil, subj, record("aaa-evil", epoch+100))),
		"subscriber":       signed(bus.SealForTest(kS, subj, record("s", epoch+100))),
		"another's id":     signed(bus.SealForTest(kO, subj, record("h", epoch+100))),
		"the subscriber's": signed(bus.SealForTest(kO, subj, record("s", epoch+100))),
	}
	before := s.Stats().Rejected["record"]
	beforeH := h.Stats().Rejected["record"]
	for name, b := range forgeries {
		// a JetStream publish: the bucket stores it (the ack says so)
		ignS, ignH := s.Stats().Ignored["record"], h.Stats().Ignored["record"]
		m, err := raw.Request("$KV.tickbus_seqs.T", b, 2*time.Second)
		require.NoError(t, err, name)
		require.NotContains(t, string(m.Data), `"error"`, name)
		// The bucket keeps one value per key, so a watcher that lags (a
		// loaded machine) skips a record overwritten before it was
		// delivered: each forgery is judged by both nodes before the next.
		require.Eventually(t, func() bool {
			return s.Stats().Ignored["record"] > ignS && h.Stats().Ignored["record"] > ignH
		}, 4*eventually, tick, "forgery %q: not ignored by both the subscriber and the home", name)
	}
	require.Eventually(t, func() bool {
		return s.Stats().Rejected["record"] >= before+uint64(len(forgeries)-1) && // garbage is malformed, not rejected
			h.Stats().Rejected["record"] >= beforeH+uint64(len(forgeries)-1)
	}, 4*eventually, tick, "s rejected %d, h %d", s.Stats().Rejected["record"]-before, h.Stats().Rejected["record"]-beforeH)
	time.Sleep(5 * hbInterval)

	hi := lastHome()
	assert.Equal(t, "h", hi.Node.ID)
	assert.Equal(t, epoch, hi.Epoch, "a forged record moved the subscriber to another epoch")
	assert.Equal(t, "home-of-T", string(hi.Descriptor))
	assert.Zero(t, recH.count("homelost h"), "a forged record took the home away")
	assert.NoError(t, p.HomeErr())
	assert.Equal(t, "h", p.Home().Node.ID)
	assert.Contains(t, h.Stats().Homes, "T")
	for _, class := range []string{"unauthenticated", "forbidden", "identity"} {
		assert.Positive(t, logs.count(`"node":"s"`, "ignored bad message", `"kind":"record"`, `"class":"`+class+`"`), class)
	}

	// the control: the home's own key on a plain client is taken
	good := signed(bus.SealForTest(kH, subj, record("h", epoch+200)))
	m, err := raw.Request("$KV.tickbus_seqs.T", good, 2*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(m.Data), `"error"`)
	require.Eventually(t, func() bool { return lastHome().Epoch == epoch+200 }, eventually, tick,
		"a record signed with the home's key was not taken: %s", fmt.Sprint(lastHome()))
}
