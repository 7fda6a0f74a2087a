package bus

import (
	"context"

	"github.com/tickbus/tickbus/rdma"
)

// Mode is a subscription's flow-control mode.
type Mode string

const (
	// ModeLossy never slows a publisher; every loss is reported.
	ModeLossy Mode = "lossy"
	// ModeReliable: the subscriber writes its consumed position into a
	// credit cell at each publisher, which waits for room.
	ModeReliable Mode = "reliable"
)

func (m Mode) valid() bool { return m == ModeLossy || m == ModeReliable }

// PeerInfo identifies a node on the bus.
type PeerInfo struct {
	ID     string // node id, unique on the bus
	HostID string // nodes with the same HostID share memory
	// Incarnation is the node's start time in Unix nanoseconds; a node that
	// restarts under the same ID has a new one.
	Incarnation uint64
	Providers   []string // rdma providers the node can open
	// Key is the node's identity: its public user nkey ("U…"), which signs
	// every message the node sends. The bus checks it; Authorization names it.
	Key string
}

// SubscriberInfo is a subscriber of a topic as its node announced it.
type SubscriberInfo struct {
	Topic string
	ID    string // subscriber id, unique per topic on its node
	Node  PeerInfo
	Mode  Mode
	// Ring is the subscriber's ring descriptor, opaque bytes versioned by
	// the ring package. The per-provider region (address, rkey) comes back
	// in the ConnectReply of Node.Connect.
	Ring []byte
}

// Key is "node/id", unique on the bus for the topic.
func (s SubscriberInfo) Key() string { return s.Node.ID + "/" + s.ID }

// PublisherInfo is a publisher of a topic as its node announced it.
type PublisherInfo struct {
	Topic string
	ID    string // publisher id, unique per topic on its node
	Node  PeerInfo
	// Data is opaque (for example the descriptor of the publisher's credit
	// cells for reliable subscribers).
	Data []byte
}

// Key is "node/id", unique on the bus for the topic.
func (p PublisherInfo) Key() string { return p.Node.ID + "/" + p.ID }

// HomeInfo says where a topic's home (sequencer counter and journal) lives.
type HomeInfo struct {
	Topic string
	Node  PeerInfo
	// Descriptor is opaque bytes from the ring package, given by the home's
	// NewHome.
	Descriptor []byte
	// Local is true when the home is on this node.
	Local bool
	// Epoch is the home's term: the revision at which it took the topic's
	// lease in JetStream. A later home has a larger epoch.
	Epoch uint64
	// Start is the epoch's first sequence; Reserved bounds it: no sequence
	// at or above Reserved is handed out in this epoch, and the next epoch
	// starts at the last Reserved its predecessor wrote.
	Start, Reserved uint64
	// End, if not 0, is where the epoch ended: its home closed cleanly
	// with its counter here, so Start..End-1 were handed out and nothing
	// at or above End was (see PublishSpec.EndCounter).
	End uint64
}

// TargetKind says what a connect request wants to reach on its node.
type TargetKind string

const (
	TargetHome       TargetKind = "home"       // the topic's sequencer and journal
	TargetSubscriber TargetKind = "subscriber" // a subscriber's ring
	TargetPublisher  TargetKind = "publisher"  // a publisher's credit cells
)

func (k TargetKind) valid() bool {
	return k == TargetHome || k == TargetSubscriber || k == TargetPublisher
}

// ConnectRequest asks a node to connect a queue pair to the requester's.
type ConnectRequest struct {
	Topic string
	Kind  TargetKind
	// ID is the subscriber or publisher id; empty for TargetHome.
	ID string
	// From is the requesting node; the bus fills it in.
	From PeerInfo
	// Endpoint is the requester's queue pair; the accepter connects to it.
	Endpoint rdma.Endpoint
	// Data is opaque, for the accept handler.
	Data []byte
}

// ConnectReply is the accepter's side of a queue-pair exchange.
type ConnectReply struct {
	// Endpoint is the accepter's queue pair; the requester connects to it.
	Endpoint rdma.Endpoint
	// Region is the descriptor of the region the requester may reach
	// (opaque bytes, for example rdma.RemoteRegion's MarshalBinary or a
	// ring package descriptor).
	Region []byte
	// Data is opaque.
	Data []byte
}

// AcceptFunc serves a connect request: create a queue pair on the
// requester's provider, connect it to req.Endpoint, and reply with its
// endpoint and the region descriptor. An error is sent back to the
// requester, whose Connect fails with ErrConnectRefused. The context ends
// with the request timeout or when the node closes. Each request runs on its
// own goroutine, which Node.Close waits for: an AcceptFunc must not call
// Node.Close.
type AcceptFunc func(ctx context.Context, req ConnectRequest) (ConnectReply, error)
