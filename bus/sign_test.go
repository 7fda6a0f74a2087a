package bus

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testIdentity(t testing.TB) identity {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	id := identity{kp: kp, pub: pub}
	id.derive()
	require.NotNil(t, id.priv)
	return id
}

func TestEnvelope_SealOpen_RoundTripAndTamper(t *testing.T) {
	id := testIdentity(t)
	msg := seedMessages(t)[3]
	b, err := seal(id, "tickbus.d.sub.t", msg)
	require.NoError(t, err)
	key, got, err := openEnvelope("tickbus.d.sub.t", b)
	require.NoError(t, err)
	assert.Equal(t, id.pub, key)
	assert.Equal(t, msg, got)

	_, _, err = openEnvelope("tickbus.d.sub.u", b) // moved to another subject
	assert.ErrorIs(t, err, ErrUnauthenticated)
	var e envelope
	require.NoError(t, json.Unmarshal(b, &e))
	e.Msg = append([]byte(nil), e.Msg...)
	e.Msg[len(e.Msg)-2] ^= 1 // one bit of the message
	tampered, _ := json.Marshal(e)
	_, _, err = openEnvelope("tickbus.d.sub.t", tampered)
	assert.ErrorIs(t, err, ErrUnauthenticated)
	other := testIdentity(t)
	require.NoError(t, json.Unmarshal(b, &e))
	e.Key = other.pub // another key claims the signature
	swapped, _ := json.Marshal(e)
	_, _, err = openEnvelope("tickbus.d.sub.t", swapped)
	assert.ErrorIs(t, err, ErrUnauthenticated)
	_, _, err = openEnvelope("tickbus.d.sub.t", msg) // no envelope at all
	assert.ErrorIs(t, err, ErrUnauthenticated)
	_, _, err = openEnvelope("x", []byte(strings.Replace(string(b), `"env":1`, `"env":2`, 1)))
	assert.ErrorIs(t, err, ErrUnknownVersion)
	_, _, err = openEnvelope("x", []byte(strings.Repeat(" ", MaxMessageSize+1)))
	assert.ErrorIs(t, err, ErrTooLarge)
}

func TestTrust_Admit_ReplayBindingAndClock(t *testing.T) {
	now := time.Now()
	tr := newTrust(time.Minute, "self", testIdentity(t).pub)
	a, b := testIdentity(t), testIdentity(t)
	m := func(id identity, node string, inc, seq uint64, ts time.Time) *wireMsg {
		return &wireMsg{Kind: kindHeartbeat, Node: wireNode{ID: node, Key: id.pub, Inc: inc}, Seq: seq, TS: ts.UnixNano()}
	}
	require.NoError(t, tr.admit(a.pub, m(a, "n", 1, 5, now), now))
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 5, now), now), ErrReplayed, "same seq twice")
	require.NoError(t, tr.admit(a.pub, m(a, "n", 1, 3, now), now), "a little out of order is fine, once")
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 3, now), now), ErrReplayed)
	require.NoError(t, tr.admit(a.pub, m(a, "n", 1, 5+replayWindow, now), now))
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 4, now), now), ErrReplayed, "behind the window")
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 0, now), now), ErrReplayed, "seq 0")
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 9999, now.Add(-2*time.Minute)), now), ErrReplayed, "too old")
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 9999, now.Add(2*time.Minute)), now), ErrReplayed, "from the future")
	assert.ErrorIs(t, tr.admit(b.pub, m(b, "n", 2, 1, now), now), ErrIdentity, "n is a's")
	assert.ErrorIs(t, tr.admit(b.pub, m(a, "n", 2, 1, now), now), ErrUnauthenticated, "key inside differs")
	require.NoError(t, tr.admit(a.pub, m(a, "n", 2, 1, now), now), "a restart: new incarnation, seq from 1")
	assert.ErrorIs(t, tr.admit(a.pub, m(a, "n", 1, 99999, now), now), ErrReplayed, "older incarnation")
	tr.release("n")
	require.NoError(t, tr.admit(b.pub, m(b, "n", 3, 1, now), now), "released: the id may be bound again")
	// a second node under the same key has its own sequence
	require.NoError(t, tr.admit(b.pub, m(b, "n2", 7, 1, now), now))
}

// FuzzOpenEnvelope: any bytes (on any subject) either fail with one of the
// package's sentinels or open to a message that verifies under the key the
// envelope names; the message inside decodes or fails with a sentinel;
// nothing panics.
func FuzzOpenEnvelope(f *testing.F) {
	id := testIdentity(f)
	for _, m := range seedMessages(f) {
		b, err := seal(id, "s", m)
		require.NoError(f, err)
		f.Add("s", b)
	}
	f.Add("s", []byte(`{"env":1}`))
	f.Add("s", []byte(`{"env":1,"key":"UABC","sig":"AAAA","msg":"e30="}`))
	f.Add("", []byte(`null`))
	f.Fuzz(func(t *testing.T, subject string, b []byte) {
		key, msg, err := openEnvelope(subject, b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		pk, err := nkeys.FromPublicKey(key)
		if err != nil {
			t.Fatalf("opened with an unusable key %q: %v", key, err)
		}
		if err := pk.Verify(signedBytes(subject, msg), mustSig(t, b)); err != nil {
			t.Fatalf("opened but does not verify: %v", err)
		}
		if _, err := decode(msg); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("inner decode error without a sentinel: %v", err)
		}
	})
}

func mustSig(t *testing.T, b []byte) []byte {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("opened envelope does not unmarshal: %v", err)
	}
	return e.Sig
}

// BenchmarkEnvelope: the cost signing adds to each control message (a
// heartbeat and a connect request), sealing and opening, beside the plain
// encode and decode it wraps.
func BenchmarkEnvelope(b *testing.B) {
	id := testIdentity(b)
	msgs := seedMessages(b)
	for _, c := range []struct {
		name string
		msg  []byte
	}{{"hb", msgs[0]}, {"conn", msgs[8]}} {
		sealed, err := seal(id, "tickbus.qp.n", c.msg)
		require.NoError(b, err)
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decode(c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/seal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := seal(id, "tickbus.qp.n", c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		viaNkeys := identity{kp: id.kp, pub: id.pub} // no derived key: nkeys re-derives it per Sign
		b.Run(c.name+"/seal-nkeys-sign", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := seal(viaNkeys, "tickbus.qp.n", c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/open", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := openEnvelope("tickbus.qp.n", sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
