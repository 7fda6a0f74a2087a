package bus

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nkeys"

	"github.com/tickbus/tickbus/rdma"
)

// WireVersion is the version of the bus envelope this package writes and
// reads. The envelope is JSON:
//
//	{"v":1,"kind":"sub","node":{"id":"…","host":"…","inc":…,"prov":["shm","tcp"]},
//	 "topic":"…","id":"…","mode":"lossy","desc":"<base64>",…}
//
// Every message travels inside a signed envelope (see EnvelopeVersion);
// node.key, seq and ts are what the envelope's checks read.
//
// Descriptors inside it (ring, home, regions, rdma.Endpoint) are opaque
// bytes with their own versions.
const WireVersion = 1

// MaxMessageSize bounds every bus message; larger ones are rejected unread.
const MaxMessageSize = 64 << 10

// maxBlob bounds each opaque field (descriptor, data, endpoint).
const maxBlob = 16 << 10

const maxHostLen = 255
const maxErrLen = 1024

// Message kinds.
const (
	kindHeartbeat = "hb"     // P.d.hb: I am alive
	kindBye       = "bye"    // P.d.bye: I am leaving
	kindWho       = "who"    // P.d.who: who is there? everyone re-announces
	kindSub       = "sub"    // P.d.sub.<topic>: subscriber announced
	kindUnsub     = "unsub"  // P.d.sub.<topic>: subscriber withdrew
	kindPub       = "pub"    // P.d.pub.<topic>: publisher announced
	kindUnpub     = "unpub"  // P.d.pub.<topic>: publisher withdrew
	kindClaim     = "claim"  // P.d.home.<topic>: I want to be home
	kindHome      = "home"   // P.d.home.<topic>: I am home (assertion)
	kindUnhome    = "unhome" // P.d.home.<topic>: I stopped being home
	kindHomeQuery = "homeq"  // request on P.home.<topic>
	kindHomeInfo  = "homei"  // reply: the home
	kindConnect   = "conn"   // request on P.qp.<node>
	kindAccept    = "acc"    // reply: accepted
	kindError     = "err"    // reply: refused; code and text
)

type wireNode struct {
	ID   string   `json:"id"`
	Host string   `json:"host"`
	Inc  uint64   `json:"inc"`
	Prov []string `json:"prov,omitempty"`
	Key  string   `json:"key,omitempty"` // public user nkey; must sign the envelope
}

// wireMsg is the one envelope of every bus message; kind says which fields
// matter.
type wireMsg struct {
	V      int      `json:"v"`
	Kind   string   `json:"kind"`
	Node   wireNode `json:"node"`
	Topic  string   `json:"topic,omitempty"`
	ID     string   `json:"id,omitempty"`
	Mode   string   `json:"mode,omitempty"`
	Target string   `json:"target,omitempty"` // conn: what to reach; who: which announcements (TargetKind)
	Desc   []byte   `json:"desc,omitempty"`
	Data   []byte   `json:"data,omitempty"`
	EP     []byte   `json:"ep,omitempty"`
	Code   string   `json:"code,omitempty"`
	Err    string   `json:"err,omitempty"`
	Seq    uint64   `json:"seq,omitempty"` // per node incarnation, from 1, against replay
	TS     int64    `json:"ts,omitempty"`  // send time, Unix ns, against replay

	ep rdma.Endpoint // decoded EP, for conn and acc
}

func (w *wireMsg) peer() PeerInfo {
	return PeerInfo{ID: w.Node.ID, HostID: w.Node.Host, Incarnation: w.Node.Inc, Providers: w.Node.Prov, Key: w.Node.Key}
}

func nodeOf(p PeerInfo) wireNode {
	return wireNode{ID: p.ID, Host: p.HostID, Inc: p.Incarnation, Prov: p.Providers, Key: p.Key}
}

// encode marshals w with version WireVersion.
func encode(w *wireMsg) ([]byte, error) {
	w.V = WireVersion
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("bus: encode %s: %w", w.Kind, err)
	}
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %s message of %d bytes, limit %d", ErrTooLarge, w.Kind, len(b), MaxMessageSize)
	}
	return b, nil
}

// decode parses and validates one message. Every failure wraps
// ErrTooLarge, ErrUnknownVersion or ErrMalformed.
func decode(b []byte) (*wireMsg, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if head.V == nil {
		return nil, fmt.Errorf("%w: no version", ErrMalformed)
	}
	if *head.V != WireVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrUnknownVersion, *head.V, WireVersion)
	}
	var w wireMsg
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	return &w, nil
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

func (w *wireMsg) validate() error {
	if !validToken(w.Node.ID) {
		return bad("%s: node id %q", w.Kind, w.Node.ID)
	}
	if w.Node.Key != "" && !nkeys.IsValidPublicUserKey(w.Node.Key) {
		return bad("%s: node key %.64q", w.Kind, w.Node.Key)
	}
	if len(w.Node.Host) > maxHostLen {
		return bad("%s: host id of %d bytes", w.Kind, len(w.Node.Host))
	}
	if len(w.Node.Prov) > maxProviders {
		return bad("%s: %d providers", w.Kind, len(w.Node.Prov))
	}
	for _, p := range w.Node.Prov {
		if len(p) == 0 || len(p) > 16 {
			return bad("%s: provider %q", w.Kind, p)
		}
	}
	if len(w.Desc) > maxBlob || len(w.Data) > maxBlob || len(w.EP) > maxBlob {
		return bad("%s: blob over %d bytes", w.Kind, maxBlob)
	}
	if len(w.Err) > maxErrLen || len(w.Code) > maxTokenLen {
		return bad("%s: error text too long", w.Kind)
	}
	needTopic := func() error {
		if !validTopic(w.Topic) {
			return bad("%s: topic %q", w.Kind, w.Topic)
		}
		return nil
	}
	needID := func() error {
		if !validToken(w.ID) {
			return bad("%s: id %q", w.Kind, w.ID)
		}
		return nil
	}
	needEP := func() error {
		if err := w.ep.UnmarshalBinary(w.EP); err != nil {
			return bad("%s: endpoint: %v", w.Kind, err)
		}
		return nil
	}
	switch w.Kind {
	case kindHeartbeat, kindBye:
		if w.Topic != "" {
			return bad("%s: topic %q, want none", w.Kind, w.Topic)
		}
		return nil
	case kindWho: // topic: only that topic; target: only its subscribers or publishers; id: only that node answers
		if k := TargetKind(w.Target); k != "" && k != TargetSubscriber && k != TargetPublisher {
			return bad("who: target %q, want subscriber, publisher or none", w.Target)
		}
		if w.Topic != "" {
			if err := needTopic(); err != nil {
				return err
			}
		}
		if w.ID != "" {
			return needID()
		}
		return nil
	case kindSub:
		if err := needTopic(); err != nil {
			return err
		}
		if err := needID(); err != nil {
			return err
		}
		if !Mode(w.Mode).valid() {
			return bad("sub: mode %q, want lossy or reliable", w.Mode)
		}
		return nil
	case kindUnsub, kindPub, kindUnpub:
		if err := needTopic(); err != nil {
			return err
		}
		return needID()
	case kindClaim, kindHome, kindUnhome, kindHomeQuery, kindHomeInfo:
		return needTopic()
	case kindConnect:
		if err := needTopic(); err != nil {
			return err
		}
		if !TargetKind(w.Target).valid() {
			return bad("conn: target %q", w.Target)
		}
		if TargetKind(w.Target) != TargetHome {
			if err := needID(); err != nil {
				return err
			}
		}
		return needEP()
	case kindAccept:
		return needEP()
	case kindError:
		if w.Code == "" {
			return bad("err: no code")
		}
		return nil
	}
	return bad("unknown kind %q", w.Kind)
}

// Error codes carried in kindError replies.
const (
	codeUnknownTarget = "unknown-target"
	codeRefused       = "refused"
	codeMalformed     = "malformed"
	codeNotHome       = "not-home"
)

func errorFromWire(w *wireMsg) error {
	switch w.Code {
	case codeUnknownTarget:
		return fmt.Errorf("%w: %s", ErrUnknownTarget, w.Err)
	case codeRefused:
		return fmt.Errorf("%w: %s", ErrConnectRefused, w.Err)
	case codeMalformed:
		return fmt.Errorf("%w (peer says): %s", ErrMalformed, w.Err)
	case codeNotHome:
		return fmt.Errorf("%w: %s", ErrNoHome, w.Err)
	}
	return fmt.Errorf("%w: code %q: %s", ErrConnectRefused, w.Code, w.Err)
}
