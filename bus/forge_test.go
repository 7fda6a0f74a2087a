package bus_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

var forgeSeq atomic.Uint64

// newKey is a fresh user nkey: an identity the bus has never seen.
func newKey(t testing.TB) (nkeys.KeyPair, string) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	return kp, pub
}

// forge turns a message (JSON, as the bus writes it) into a signed
// envelope for subject: node.key, a fresh seq and the time are filled in,
// and kp signs it. A nil kp leaves node.key as given and signs with a
// fresh key: a mis-signed message.
func forge(t testing.TB, kp nkeys.KeyPair, subject, msg string) []byte {
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(msg), &m))
	signer := kp
	if signer == nil {
		signer, _ = newKey(t)
	} else {
		pub, err := kp.PublicKey()
		require.NoError(t, err)
		m["node"].(map[string]any)["key"] = pub
	}
	m["seq"] = forgeSeq.Add(1)
	m["ts"] = time.Now().UnixNano()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	out, err := bus.SealForTest(signer, subject, b)
	require.NoError(t, err)
	return out
}
