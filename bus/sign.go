package bus

import (
	"bytes"
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
	sig, err := id.kp.Sign(signedBytes(subject, msg))
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
	if len(b) > MaxMessageSize {
		return "", nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&e); err != nil {
		return "", nil, fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	if dec.More() {
		return "", nil, fmt.Errorf("%w: trailing data after the envelope", ErrMalformed)
	}
	if e.Env == nil {
		return "", nil, fmt.Errorf("%w: no signed envelope", ErrUnauthenticated)
	}
	if *e.Env != EnvelopeVersion {
		return "", nil, fmt.Errorf("%w: envelope version %d, want %d", ErrUnknownVersion, *e.Env, EnvelopeVersion)
	}
	if !nkeys.IsValidPublicUserKey(e.Key) {
		return "", nil, fmt.Errorf("%w: key %.64q is not a public user nkey", ErrUnauthenticated, e.Key)
	}
	pk, err := nkeys.FromPublicKey(e.Key)
	if err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrUnauthenticated, err)
	}
	if err := pk.Verify(signedBytes(subject, e.Msg), e.Sig); err != nil {
		return "", nil, fmt.Errorf("%w: signature of %s on %q: %v", ErrUnauthenticated, e.Key, subject, err)
	}
	return e.Key, e.Msg, nil
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
	skew time.Duration

	mu     sync.Mutex
	bound  map[string]string       // node id → public key
	replay map[string]*replayState // key + "/" + node id → state
}

func newTrust(skew time.Duration) *trust {
	return &trust{skew: skew, bound: map[string]string{}, replay: map[string]*replayState{}}
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
	}
	t.replay[rk] = r
	t.bound[w.Node.ID] = key
	return nil
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
