package bus

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nkeys"
)

// EnvelopeVersion is the version of the signed envelope around every bus
// message:
//
//	{"env":1,"key":"U…","sig":"<base64 ed25519>","msg":"<base64 message>"}
//
// sig signs "tickbus-env/1\n" + subject + "\n" + msg, so a message cannot be
// moved to another subject (another target node, another reply inbox). The
// message inside (WireVersion) names the same key in node.key, and carries a
// per-node sequence (seq) and the send time (ts, Unix ns) against replay.
const EnvelopeVersion = 1

const sigContext = "tickbus-env/1\n"

type envelope struct {
	Env *int   `json:"env"`
	Key string `json:"key"`
	Sig []byte `json:"sig"`
	Msg []byte `json:"msg"`
}

func signedBytes(subject string, msg []byte) []byte {
	b := make([]byte, 0, len(sigContext)+len(subject)+1+len(msg))
	b = append(b, sigContext...)
	b = append(b, subject...)
	b = append(b, '\n')
	return append(b, msg...)
}

// seal wraps msg (an encoded wireMsg) for subject, signed by id.
func seal(id identity, subject string, msg []byte) ([]byte, error) {
	sig, err := id.sign(signedBytes(subject, msg))
	if err != nil {
		return nil, fmt.Errorf("bus: sign: %w", err)
	}
	v := EnvelopeVersion
	b, err := json.Marshal(envelope{Env: &v, Key: id.pub, Sig: sig, Msg: msg})
	if err != nil {
		return nil, fmt.Errorf("bus: seal: %w", err)
	}
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: sealed message of %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	return b, nil
}

// openEnvelope checks the envelope of b received on subject and returns the
// signer's public key and the message inside. Failures wrap ErrTooLarge,
// ErrMalformed, ErrUnknownVersion or ErrUnauthenticated (no envelope, not a
// user key, bad signature).
func openEnvelope(subject string, b []byte) (string, []byte, error) {
	e, err := parseEnvelope(b)
	if err != nil {
		return "", nil, err
	}
	pk, err := publicKey(e.Key)
	if err != nil {
		return "", nil, err
	}
	if len(e.Sig) != ed25519.SignatureSize || !ed25519.Verify(pk, signedBytes(subject, e.Msg), e.Sig) {
		return "", nil, fmt.Errorf("%w: signature of %s on %q does not verify", ErrUnauthenticated, e.Key, subject)
	}
	return e.Key, e.Msg, nil
}

// parseEnvelope decodes an envelope without checking its signature.
func parseEnvelope(b []byte) (envelope, error) {
	if len(b) > MaxMessageSize {
		return envelope{}, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	if dec.More() {
		return e, fmt.Errorf("%w: trailing data after the envelope", ErrMalformed)
	}
	if e.Env == nil {
		return e, fmt.Errorf("%w: no signed envelope", ErrUnauthenticated)
	}
	if *e.Env != EnvelopeVersion {
		return e, fmt.Errorf("%w: envelope version %d, want %d", ErrUnknownVersion, *e.Env, EnvelopeVersion)
	}
	return e, nil
}

// keyCache holds decoded public keys, so that each is decoded once.
var keyCache struct {
	sync.Mutex
	m map[string]ed25519.PublicKey
}

// publicKey decodes a public user nkey.
func publicKey(key string) (ed25519.PublicKey, error) {
	keyCache.Lock()
	pk, ok := keyCache.m[key]
	keyCache.Unlock()
	if ok {
		return pk, nil
	}
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(key))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: key %.64q is not a public user nkey", ErrUnauthenticated, key)
	}
	pk = ed25519.PublicKey(raw)
	keyCache.Lock()
	if keyCache.m == nil || len(keyCache.m) >= maxSenders {
		keyCache.m = map[string]ed25519.PublicKey{} // a flood of keys: forget, rather than grow
	}
	keyCache.m[key] = pk
	keyCache.Unlock()
	return pk, nil
}

// replayWindow is how many sequences behind the highest seen from a sender
// are still accepted (once each): messages of one sender reach us on
// several subscriptions, a little out of order.
const replayWindow = 1024

// maxSenders bounds the replay and binding tables against a flood of
// made-up identities; past it the oldest-looking entries are forgotten.
const maxSenders = 16384

type replayState struct {
	inc  uint64
	max  uint64
	seen [replayWindow / 64]uint64 // bit (seq % window) for seq in (max-window, max]
}

// check records seq; false if it is a replay or too old.
func (r *replayState) check(seq uint64) bool {
	bit := func(s uint64) (*uint64, uint64) { return &r.seen[(s/64)%(replayWindow/64)], 1 << (s % 64) }
	switch {
	case seq == 0:
		return false
	case seq > r.max:
		if seq-r.max >= replayWindow {
			clear(r.seen[:])
		} else {
			for s := r.max + 1; s < seq; s++ {
				w, m := bit(s)
				*w &^= m
			}
		}
		r.max = seq
	case r.max-seq >= replayWindow:
		return false
	default:
		if w, m := bit(seq); *w&m != 0 {
			return false
		}
	}
	w, m := bit(seq)
	*w |= m
	return true
}

// trust holds what this node learnt about other nodes' keys: which key
// each node id is bound to (first seen; released when the peer leaves or
// ages out), and the replay state per key, node and incarnation.
type trust struct {
	skew          time.Duration
	self, selfKey string // this node's id stays bound to its key

	mu     sync.Mutex
	bound  map[string]string       // node id → public key
	replay map[string]*replayState // key + "/" + node id → state
}

// newTrust starts with this node's own id bound to its own key.
func newTrust(skew time.Duration, self, key string) *trust {
	return &trust{skew: skew, self: self, selfKey: key, bound: map[string]string{self: key}, replay: map[string]*replayState{}}
}

// admit checks that w (signed by key) is fresh, not replayed, and from the
// key its node id is bound to, binding a node id seen for the first time.
// Nothing is recorded for a message it refuses.
func (t *trust) admit(key string, w *wireMsg, now time.Time) error {
	if w.Node.Key != key {
		return fmt.Errorf("%w: node %s names key %.64q inside an envelope signed by %s", ErrUnauthenticated, w.Node.ID, w.Node.Key, key)
	}
	if d := now.Sub(time.Unix(0, w.TS)); d > t.skew || d < -t.skew {
		return fmt.Errorf("%w: %s message of node %s sent at %v, %v from now (limit %v)", ErrReplayed, w.Kind, w.Node.ID, time.Unix(0, w.TS).UTC(), d, t.skew)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.bound[w.Node.ID]; ok && b != key {
		return fmt.Errorf("%w: node %s is bound to %s, message signed by %s", ErrIdentity, w.Node.ID, b, key)
	}
	rk := key + "/" + w.Node.ID
	r := t.replay[rk]
	switch {
	case r == nil:
		r = &replayState{inc: w.Node.Inc}
	case w.Node.Inc < r.inc:
		return fmt.Errorf("%w: %s message of an older incarnation of node %s", ErrReplayed, w.Kind, w.Node.ID)
	case w.Node.Inc > r.inc:
		*r = replayState{inc: w.Node.Inc}
	}
	if !r.check(w.Seq) {
		return fmt.Errorf("%w: %s message %d of node %s seen before or too old", ErrReplayed, w.Kind, w.Seq, w.Node.ID)
	}
	if len(t.replay) >= maxSenders || len(t.bound) >= maxSenders {
		clear(t.replay) // a flood of identities: forget, rather than grow
		clear(t.bound)
		t.bound[t.self] = t.selfKey
	}
	t.replay[rk] = r
	t.bound[w.Node.ID] = key
	return nil
}

// boundKey is the key node id is bound to, if any.
func (t *trust) boundKey(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.bound[id]
	return k, ok
}

// release unbinds a node id that left or aged out, so that the node may
// come back with another key (a restart with a generated key).
func (t *trust) release(id string) {
	t.mu.Lock()
	delete(t.bound, id)
	t.mu.Unlock()
}

// refusal is a security check's error with the sender it names, so that
// badInput logs once per peer and kind.
type refusal struct {
	peer string // node id, or the signing key when there is no message yet
	err  error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// seal stamps w with this node, its next sequence and the time, encodes it
// and signs it for subject.
func (n *Node) seal(subject string, w *wireMsg) ([]byte, error) {
	w.Node = nodeOf(n.self)
	w.Seq = n.sendSeq.Add(1)
	w.TS = time.Now().UnixNano()
	b, err := encode(w)
	if err != nil {
		return nil, err
	}
	return seal(n.id, subject, b)
}

// isOwnEcho reports whether b is a discovery message this very node sent
// (its key, id and incarnation), which it ignores without paying for a
// signature check. A forgery of one is ignored the same way; a message
// under this node's key from another node (shared credentials) or another
// incarnation is not an echo and goes through open.
func (n *Node) isOwnEcho(b []byte) bool {
	e, err := parseEnvelope(b)
	if err != nil || e.Key != n.id.pub {
		return false
	}
	w, err := decode(e.Msg)
	return err == nil && w.Node.ID == n.self.ID && w.Node.Inc == n.self.Incarnation && w.Node.Key == n.id.pub
}

// open checks the envelope of b (received on subject), decodes the message
// and admits it: fresh, not replayed, from the key its node id is bound to.
// Security failures come back as *refusal wrapping ErrUnauthenticated,
// ErrReplayed or ErrIdentity; the rest as decode does.
func (n *Node) open(subject string, b []byte) (*wireMsg, error) {
	key, msg, err := openEnvelope(subject, b)
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			return nil, &refusal{peer: "unsigned", err: err}
		}
		return nil, err
	}
	w, err := decode(msg)
	if err != nil {
		return nil, err
	}
	if err := n.trust.admit(key, w, time.Now()); err != nil {
		return nil, &refusal{peer: w.Node.ID, err: err}
	}
	return w, nil
}

// authorize checks that w's signer may send w: Config.Authorization for
// the kinds that touch a topic.
func (n *Node) authorize(w *wireMsg) error {
	a := n.cfg.Authorization
	pub, sub := a.CanPublish(w.Node.Key, w.Topic), a.CanSubscribe(w.Node.Key, w.Topic)
	var ok bool
	switch w.Kind {
	case kindSub, kindUnsub:
		ok = sub
	case kindPub, kindUnpub, kindClaim, kindHome, kindUnhome, kindHomeInfo:
		ok = pub
	case kindHomeQuery:
		ok = pub || sub
	case kindConnect:
		switch TargetKind(w.Target) {
		case TargetSubscriber:
			ok = pub // writes ticks into a subscriber's ring
		case TargetHome:
			ok = pub || sub // publishers claim; subscribers read the counter
		case TargetPublisher:
			ok = sub // a subscriber's credits
		}
	default:
		ok = true // hb, bye, who, acc, err: authenticated is enough
	}
	if !ok {
		return &refusal{peer: w.Node.ID, err: fmt.Errorf("%w: %s %s (node %s) sent %s on topic %q",
			ErrForbidden, "identity", w.Node.Key, w.Node.ID, w.Kind, w.Topic)}
	}
	return nil
}
