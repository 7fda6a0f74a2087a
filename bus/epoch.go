package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// homeRecord is a topic's sequencer state in the JetStream bucket
// <prefix>_seqs, key <topic>: who is home in which epoch, where the epoch's
// sequences start, and how far the home may hand them out. It outlives the
// lease (bucket <prefix>_homes), so a successor learns where to start even
// after the old home's lease expired.
//
// Every write is a compare-and-set on the key's last revision, so the
// record's history is one line: a home extends Reserved only while no
// successor has written, and a successor starts at the last Reserved
// written, so no sequence is ever handed out in two epochs.
type homeRecord struct {
	Version   int      `json:"v"`
	Epoch     uint64   `json:"epoch"` // revision of the lease's Create in <prefix>_homes
	Node      string   `json:"node"`
	Host      string   `json:"host"`
	Inc       uint64   `json:"inc"`
	Providers []string `json:"prov,omitempty"`
	Start     uint64   `json:"start"`    // first sequence of the epoch
	Reserved  uint64   `json:"reserved"` // no sequence >= Reserved is handed out in this epoch
	Desc      []byte   `json:"desc,omitempty"`
	// End, if not 0, is the counter a home that closed cleanly left (the
	// next sequence it would have handed out): the epoch handed out
	// Start..End-1 and nothing more. Subscribers that stopped short of it
	// name the rest as lost (a publisher stopped writing to them). Written
	// once, by the closing home, before it deletes its lease.
	End uint64 `json:"end,omitempty"`
}

const recordVersion = 1

// In the bucket, each record is sealed (the signed envelope of sign.go) by
// the node that wrote it, for the subject "kv.<bucket>.<topic>": a record
// cannot be moved to another topic or bucket, and a reader checks who wrote
// it (readRecord).

func marshalRecord(r homeRecord) ([]byte, error) {
	r.Version = recordVersion
	return json.Marshal(r)
}

// recordSubject is what a record of topic in bucket is signed for.
func recordSubject(bucket, topic string) string { return "kv." + bucket + "." + topic }

// seqsBucket is the name of the bucket of home records.
func (n *Node) seqsBucket() string { return strings.ReplaceAll(n.cfg.Prefix, ".", "_") + "_seqs" }

// encodeRecord is r as written to the bucket: signed with this node's key.
func (n *Node) encodeRecord(topic string, r homeRecord) ([]byte, error) {
	b, err := marshalRecord(r)
	if err != nil {
		return nil, err
	}
	return seal(n.id, recordSubject(n.seqsBucket(), topic), b)
}

// openRecord checks the envelope of a record of topic read from bucket and
// decodes it: the signer's public key and the record.
func openRecord(bucket, topic string, b []byte) (string, homeRecord, error) {
	key, msg, err := openEnvelope(recordSubject(bucket, topic), b)
	if err != nil {
		return "", homeRecord{}, err
	}
	r, err := decodeRecord(msg)
	return key, r, err
}

// readRecord opens a record of topic read from the bucket and refuses
// (a *refusal, for badInput) one that is unsigned or mis-signed
// (ErrUnauthenticated), signed by an identity not allowed to publish on
// topic (ErrForbidden), or naming a node id bound to another key
// (ErrIdentity).
func (n *Node) readRecord(topic string, b []byte) (homeRecord, error) {
	key, r, err := openRecord(n.seqsBucket(), topic, b)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return homeRecord{}, &refusal{peer: "unsigned", err: fmt.Errorf("home record of %q: %w", topic, err)}
	case err != nil:
		return homeRecord{}, err
	case !n.cfg.Authorization.CanPublish(key, topic):
		return homeRecord{}, &refusal{peer: r.Node, err: fmt.Errorf("%w: home record of %q (node %s) signed by %s",
			ErrForbidden, topic, r.Node, key)}
	}
	if bound, ok := n.trust.boundKey(r.Node); ok && bound != key {
		return homeRecord{}, &refusal{peer: r.Node, err: fmt.Errorf("%w: home record of %q names node %s, bound to %s, signed by %s",
			ErrIdentity, topic, r.Node, bound, key)}
	}
	return r, nil
}

// decodeRecord parses and checks a record (inside its envelope): anything
// malformed is an error wrapping ErrMalformed, never a crash.
func decodeRecord(b []byte) (homeRecord, error) {
	var r homeRecord
	if len(b) > 4*maxBlob {
		return homeRecord{}, fmt.Errorf("%w: home record of %d bytes", ErrMalformed, len(b))
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return homeRecord{}, fmt.Errorf("%w: home record: %v", ErrMalformed, err)
	}
	switch {
	case r.Version != recordVersion:
		return homeRecord{}, fmt.Errorf("%w: home record version %d, want %d", ErrUnknownVersion, r.Version, recordVersion)
	case r.Epoch == 0:
		return homeRecord{}, fmt.Errorf("%w: home record with epoch 0", ErrMalformed)
	case checkToken("home record node", r.Node) != nil:
		return homeRecord{}, fmt.Errorf("%w: home record node %q", ErrMalformed, r.Node)
	case len(r.Host) > 255 || !utf8.ValidString(r.Host):
		return homeRecord{}, fmt.Errorf("%w: home record host of %d bytes", ErrMalformed, len(r.Host))
	case len(r.Providers) > maxProviders:
		return homeRecord{}, fmt.Errorf("%w: home record with %d providers", ErrMalformed, len(r.Providers))
	case r.Start == 0 || r.Reserved < r.Start || r.Reserved == ^uint64(0):
		return homeRecord{}, fmt.Errorf("%w: home record start %d reserved %d", ErrMalformed, r.Start, r.Reserved)
	case r.End != 0 && (r.End < r.Start || r.End > r.Reserved):
		return homeRecord{}, fmt.Errorf("%w: home record end %d outside start %d..reserved %d", ErrMalformed, r.End, r.Start, r.Reserved)
	case len(r.Desc) > maxBlob:
		return homeRecord{}, fmt.Errorf("%w: home record descriptor of %d bytes", ErrMalformed, len(r.Desc))
	}
	for _, p := range r.Providers {
		if !knownProvider(p) {
			return homeRecord{}, fmt.Errorf("%w: home record provider %q", ErrMalformed, p)
		}
	}
	return r, nil
}

// info is the record as a HomeInfo for this node.
func (r homeRecord) info(topic string, self PeerInfo) HomeInfo {
	local := r.Node == self.ID && r.Inc == self.Incarnation
	node := PeerInfo{ID: r.Node, HostID: r.Host, Incarnation: r.Inc, Providers: r.Providers}
	if local {
		node = self
	}
	return HomeInfo{Topic: topic, Node: node, Descriptor: r.Desc, Local: local,
		Epoch: r.Epoch, Start: r.Start, Reserved: r.Reserved, End: r.End}
}

// kvKey is topic's key in the home buckets. A topic token may hold ':',
// which a KV key may not; '=' may stand in a key but never in a topic, so
// the mapping is one to one and kvTopic undoes it.
func kvKey(topic string) string { return strings.ReplaceAll(topic, ":", "=") }

// kvTopic is the topic of a home bucket's key (kvKey's inverse).
func kvTopic(key string) string { return strings.ReplaceAll(key, "=", ":") }
