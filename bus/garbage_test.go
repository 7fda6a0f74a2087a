package bus_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// ringDesc is a real ring descriptor; with exists false its region length
// is zero: it names a region that cannot hold the ring.
func ringDesc(t *testing.T, exists bool) []byte {
	d := ring.RingDesc{Mode: ring.Lossy, Epoch: 1, Start: 1, Slots: 64, SlotSize: 128,
		Region: rdma.RemoteRegion{Addr: 1 << 20, RKey: 7, Len: uint64(ring.RegionHeaderSize + 64*128)}}
	b, err := d.MarshalBinary()
	require.NoError(t, err)
	if !exists { // the ring package refuses to write it: patch the length
		off := 2 + 1 + 8 + 8 + 8 + 4 // version, kind, mode, epoch, start, addr, rkey
		for i := range 8 {
			b[off+i] = 0
		}
	}
	return b
}

func validRing(s bus.SubscriberInfo) error {
	var d ring.RingDesc
	return d.UnmarshalBinary(s.Ring)
}

func TestNode_Garbage_OnEverySubject_LoggedOnceIgnoredCounted(t *testing.T) {
	ctx := context.Background()
	var logs logBuf
	ca := testConfig("a", "")
	ca.Logger = loggerTo(&logs)
	a := openNode(t, ca)
	var rec recorder
	ps := pubSpec("T", &rec)
	ps.ValidateSubscriber = validRing
	pub, err := a.Publish(ctx, ps)
	require.NoError(t, err)

	raw, err := nats.Connect(a.ClientURL())
	require.NoError(t, err)
	defer raw.Close()

	good := map[string]string{
		"tickbus.d.hb":     `{"v":1,"kind":"hb","node":{"id":"ghost","host":"h","inc":1}}`,
		"tickbus.d.bye":    `{"v":1,"kind":"bye","node":{"id":"ghost","host":"h","inc":1}}`,
		"tickbus.d.who":    `{"v":1,"kind":"who","node":{"id":"ghost","host":"h","inc":1}}`,
		"tickbus.d.sub.T":  `{"v":1,"kind":"sub","node":{"id":"ghost","host":"h","inc":1},"topic":"T","id":"s","mode":"lossy"}`,
		"tickbus.d.pub.T":  `{"v":1,"kind":"pub","node":{"id":"ghost","host":"h","inc":1},"topic":"T","id":"p"}`,
		"tickbus.d.home.T": `{"v":1,"kind":"claim","node":{"id":"ghost","host":"h","inc":1},"topic":"T"}`,
		"tickbus.home.T":   `{"v":1,"kind":"homeq","node":{"id":"ghost","host":"h","inc":1},"topic":"T"}`,
		"tickbus.qp.a":     `{"v":1,"kind":"conn","node":{"id":"ghost","host":"h","inc":1},"topic":"T","target":"home","ep":"AQ=="}`,
	}
	kinds := map[string]string{
		"tickbus.d.hb": "hb", "tickbus.d.bye": "bye", "tickbus.d.who": "who", "tickbus.d.sub.T": "sub",
		"tickbus.d.pub.T": "pub", "tickbus.d.home.T": "home", "tickbus.home.T": "homeq", "tickbus.qp.a": "conn",
	}
	huge := make([]byte, 1_000_000)
	for i := range huge {
		huge[i] = '{'
	}
	const reps = 20
	want := map[string]uint64{}
	for subj, msg := range good {
		payloads := [][]byte{
			[]byte(msg[:len(msg)/2]),                          // truncated JSON
			[]byte(strings.Replace(msg, `"v":1`, `"v":2`, 1)), // unknown version
			huge, // 1 MB
			[]byte(strings.Replace(msg, `"node":{"id":"ghost"`, `"node":{"id":"a.b"`, 1)),       // bad id
			[]byte(`{"v":1,"kind":"bye","node":{"id":"x","host":"h","inc":1},"topic":"wrong"}`), // wrong subject
		}
		rnd := make([]byte, 64)
		_, _ = rand.Read(rnd)
		payloads = append(payloads, rnd)
		for range reps {
			for _, p := range payloads {
				if subj == "tickbus.home.T" || subj == "tickbus.qp.a" {
					require.NoError(t, raw.PublishRequest(subj, nats.NewInbox(), p))
				} else {
					require.NoError(t, raw.Publish(subj, p))
				}
			}
		}
		for range 2 { // 1 MB, twice: once would not show a log storm
			if subj == "tickbus.home.T" || subj == "tickbus.qp.a" {
				require.NoError(t, raw.PublishRequest(subj, nats.NewInbox(), huge))
			} else {
				require.NoError(t, raw.Publish(subj, huge))
			}
		}
		want[kinds[subj]] = uint64(reps*len(payloads) + 2)
	}
	// a well-formed, signed announcement whose ring descriptor names a
	// region that cannot hold the ring: rejected by the publisher's validator
	forged := fmt.Sprintf(`{"v":1,"kind":"sub","node":{"id":"forger","host":"h","inc":1},"topic":"T","id":"s","mode":"lossy","desc":%q}`,
		b64(ringDesc(t, false)))
	kp, _ := newKey(t)
	for range reps {
		require.NoError(t, raw.Publish("tickbus.d.sub.T", forge(t, kp, "tickbus.d.sub.T", forged)))
	}
	want["sub"]++ // the same announcement again is not news: validated once
	require.NoError(t, raw.Flush())

	defer func() {
		if t.Failed() {
			t.Logf("ignored %v, want at least %v", a.Stats().Ignored, want)
		}
	}()
	require.Eventually(t, func() bool {
		got := a.Stats().Ignored
		for k, v := range want {
			if got[k] < v {
				return false
			}
		}
		return true
	}, eventually, tick)
	t.Logf("ignored: %v", a.Stats().Ignored)

	// discovery still works: a real subscriber is found
	b := openNode(t, testConfig("b", a.ClientURL()))
	ss := subSpec("T", "real", &rec)
	ss.Ring = ringDesc(t, true)
	_, err = b.Subscribe(ctx, ss)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rec.count("sub+b/real") == 1 }, eventually, tick)
	assert.Zero(t, rec.count("sub+forger/s"), "a rejected announcement is never reported")
	assert.Len(t, pub.Subscribers(), 1)

	// logged once per subject kind and error class, not once per message
	lines := logs.count("ignored bad message")
	assert.Positive(t, lines)
	assert.LessOrEqual(t, lines, 6*len(kinds)+1, logs.String())
	for _, k := range kinds {
		for _, class := range []string{"malformed", "unknown-version", "too-large", "rejected"} {
			assert.LessOrEqual(t, logs.count("ignored bad message", `"kind":"`+k+`"`, `"class":"`+class+`"`), 1, "kind %s class %s", k, class)
		}
		assert.Positive(t, logs.count("ignored bad message", `"kind":"`+k+`"`), "kind %s never logged", k)
	}
	assert.Equal(t, 1, logs.count("ignored bad message", `"kind":"sub"`, `"class":"rejected"`))
}
