package bus

import (
	"encoding/json"
	"fmt"
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
}

const recordVersion = 1

func encodeRecord(r homeRecord) ([]byte, error) {
	r.Version = recordVersion
	return json.Marshal(r)
}

// decodeRecord parses and checks a record read from the bucket: anything
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
		Epoch: r.Epoch, Start: r.Start, Reserved: r.Reserved}
}
