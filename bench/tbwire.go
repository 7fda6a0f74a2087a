package bench

import (
	"encoding/json"
	"fmt"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// Wiring of the tickbus cases. The parent owns each topic's home; children
// own the writers (publishers) and rings (subscribers). Descriptors and QP
// endpoints travel as JSON lines (binary forms base64'd by encoding/json):
// children's ready lines carry what they made, the parent's stdin lines
// what they need. Three steps, each a round with every child:
//
//	A  child → parent  tbMade: per topic, a reader's RingDesc and one QP
//	                   endpoint per writer; a writer's home-QP endpoint and
//	                   one endpoint per reader
//	B  parent → child  tbWriterWiring: per written topic, the HomeDesc, the
//	                   parent's home-QP endpoint, each reader's RingDesc and
//	                   endpoint; the child connects and adds targets
//	   child → parent  tbCredits: the CreditDesc AddTarget returned per reader
//	C  parent → child  tbReaderWiring: per read topic, each writer's endpoint
//	                   and credit; the child connects and adds credits
//	   then "go" to every publisher.
//
// Topic 0 runs publisher → subscriber; topic 1 (ping-pong) back.

type tbMadeTopic struct {
	Topic  int      `json:"topic"`
	Ring   []byte   `json:"ring,omitempty"`    // reader: its RingDesc
	HomeEP []byte   `json:"home_ep,omitempty"` // writer: its home QP's endpoint
	EPs    [][]byte `json:"eps"`               // reader: per writer; writer: per reader
}

type tbMade struct {
	Topics []tbMadeTopic `json:"topics"`
}

type tbWriterTopic struct {
	Topic  int      `json:"topic"`
	Home   []byte   `json:"home"`
	HomeEP []byte   `json:"home_ep"`
	Rings  [][]byte `json:"rings"`
	EPs    [][]byte `json:"eps"`
}

type tbWriterWiring struct {
	Topics []tbWriterTopic `json:"topics"`
}

type tbCreditsTopic struct {
	Topic   int      `json:"topic"`
	Credits [][]byte `json:"credits"` // per reader; empty for a lossy ring
}

type tbCredits struct {
	Topics []tbCreditsTopic `json:"topics"`
}

type tbReaderTopic struct {
	Topic   int      `json:"topic"`
	EPs     [][]byte `json:"eps"`     // per writer
	Credits [][]byte `json:"credits"` // per writer; empty for a lossy ring
}

type tbReaderWiring struct {
	Topics []tbReaderTopic `json:"topics"`
}

// maxWirePeers bounds how many peers a wiring message may name.
const maxWirePeers = 64

// decodeWire parses one wiring line into v (one of the tb* types) and
// checks every descriptor and endpoint in it, so that a malformed line is
// an error here and not a failure deep in a connect.
func decodeWire(line []byte, v any) error {
	if len(line) > maxReportLine {
		return fmt.Errorf("%w: wiring line of %d bytes", ErrBadReport, len(line))
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("%w: wiring: %v", ErrBadReport, err)
	}
	eps := func(list [][]byte) error {
		if len(list) > maxWirePeers {
			return fmt.Errorf("%w: %d peers, want at most %d", ErrBadReport, len(list), maxWirePeers)
		}
		for _, b := range list {
			var e rdma.Endpoint
			if err := e.UnmarshalBinary(b); err != nil {
				return fmt.Errorf("%w: endpoint: %w", ErrBadReport, err)
			}
		}
		return nil
	}
	rings := func(list [][]byte) error {
		for _, b := range list {
			var d ring.RingDesc
			if err := d.UnmarshalBinary(b); err != nil {
				return fmt.Errorf("%w: ring descriptor: %w", ErrBadReport, err)
			}
		}
		return nil
	}
	credits := func(list [][]byte) error {
		if len(list) > maxWirePeers {
			return fmt.Errorf("%w: %d credits, want at most %d", ErrBadReport, len(list), maxWirePeers)
		}
		for _, b := range list {
			var d ring.CreditDesc
			if err := d.UnmarshalBinary(b); err != nil {
				return fmt.Errorf("%w: credit descriptor: %w", ErrBadReport, err)
			}
		}
		return nil
	}
	topic := func(t int) error {
		if t != 0 && t != 1 {
			return fmt.Errorf("%w: topic %d, want 0 or 1", ErrBadReport, t)
		}
		return nil
	}
	var err error
	check := func(e error) {
		if err == nil {
			err = e
		}
	}
	switch m := v.(type) {
	case *tbMade:
		for _, t := range m.Topics {
			check(topic(t.Topic))
			check(eps(t.EPs))
			if t.Ring != nil {
				check(rings([][]byte{t.Ring}))
			}
			if t.HomeEP != nil {
				check(eps([][]byte{t.HomeEP}))
			}
			if (t.Ring == nil) == (t.HomeEP == nil) {
				check(fmt.Errorf("%w: topic %d: want exactly one of ring and home_ep", ErrBadReport, t.Topic))
			}
		}
	case *tbWriterWiring:
		for _, t := range m.Topics {
			check(topic(t.Topic))
			var h ring.HomeDesc
			if e := h.UnmarshalBinary(t.Home); e != nil {
				check(fmt.Errorf("%w: home descriptor: %w", ErrBadReport, e))
			}
			check(eps([][]byte{t.HomeEP}))
			check(rings(t.Rings))
			check(eps(t.EPs))
			if len(t.Rings) != len(t.EPs) {
				check(fmt.Errorf("%w: topic %d: %d rings, %d endpoints", ErrBadReport, t.Topic, len(t.Rings), len(t.EPs)))
			}
		}
	case *tbCredits:
		for _, t := range m.Topics {
			check(topic(t.Topic))
			check(credits(t.Credits))
		}
	case *tbReaderWiring:
		for _, t := range m.Topics {
			check(topic(t.Topic))
			check(eps(t.EPs))
			check(credits(t.Credits))
			if len(t.Credits) != 0 && len(t.Credits) != len(t.EPs) {
				check(fmt.Errorf("%w: topic %d: %d credits for %d writers", ErrBadReport, t.Topic, len(t.Credits), len(t.EPs)))
			}
		}
	default:
		return fmt.Errorf("bench: decodeWire: unknown type %T", v)
	}
	return err
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("bench: encode %T: %v", v, err)) // plain structs of bytes: cannot fail
	}
	return string(b)
}
