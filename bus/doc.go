// Package bus is tickbus's control plane on NATS: a Node per process, its
// NATS connection, discovery of publishers and subscribers, the queue-pair
// and region exchange before the first write, topic homes, heartbeats and
// stats. It never touches ticks: the data plane runs over rdma and keeps
// running while NATS is away.
//
// # Connection
//
// Open with a zero NATSConfig runs an embedded nats-server (loopback, random
// port, no JetStream, nothing on disk); Node.ClientURL gives its URL so that
// other nodes and NATS tools can join it. With URLs the node connects to an
// external server or cluster with user/password, token, nkey seed file,
// creds file and TLS as configured (NATSConfig.WaitForServer lets Open wait
// for a server that is not up yet). It reconnects forever with capped,
// jittered exponential backoff; after a reconnect it re-announces everything
// and asks who is there.
//
// # Subjects (P is Config.Prefix, default "tickbus")
//
//	P.d.hb              heartbeat, every HeartbeatInterval
//	P.d.bye             goodbye on Close: peers drop the node at once
//	P.d.who             who is there (all, or one topic): everyone re-announces
//	P.d.sub.<topic>     subscriber announced (id, mode, ring descriptor) or withdrawn
//	P.d.pub.<topic>     publisher announced (id, data) or withdrawn
//	P.d.home.<topic>    home claim, home assertion, home withdrawn
//	P.home.<topic>      request: the current home answers with its descriptor
//	P.qp.<node>         request: connect a queue pair (micro endpoint "connect")
//	P.info.<node>       request: the node's Stats as JSON (micro endpoint "info")
//	P.stats.<topic>.<subscriber>   subscribers' periodic stats (stats format)
//
// Every P.d message goes through one subscription, so each peer's messages
// are handled in the order it sent them, and every message carries the
// sender's node (id, host id, incarnation, providers): any of them counts as
// a heartbeat. A peer silent for HeartbeatTimeout is dropped; so is one that
// says goodbye, and the old incarnation of one that restarted. Dropping a
// peer reports each of its subscribers, publishers and homes as gone to the
// local owners (OnSubscriberGone, OnPublisherGone, OnHomeLost) and calls
// Config.OnPeerDown, each exactly once. A peer heard again after it was
// dropped (it was only late) is asked to re-announce (P.d.who naming it), and
// messages from an older incarnation than the one known are ignored. While
// this node's connection is down
// ageing pauses (nobody can hear anybody), and after a reconnect every peer
// gets a fresh timeout.
//
// # Wire format
//
// Every message is one JSON envelope, version WireVersion, at most
// MaxMessageSize bytes; descriptors inside it are opaque bytes versioned by
// their owners (rdma.Endpoint's binary form, ring descriptors). Anything that
// does not decode, has another version, is too large, is on the wrong
// subject, or is rejected by a spec's validator is ignored, counted in
// Stats.Ignored per subject kind, and logged at most once per LogEvery per
// subject kind and error class.
//
// # Topic homes
//
// A topic's home (sequencer counter and journal) lives with one publisher.
// Publish decides it so:
//
//  1. a home already on this node is used;
//  2. Config.Homes may name the home node: that node becomes home at once;
//     others ask it (P.home.<topic>) until Publish's context ends;
//  3. otherwise ask P.home.<topic>; the current home answers;
//  4. with no responder, publish a claim on P.d.home.<topic> and wait
//     ClaimWindow. A claim from a node with a smaller id, or an assertion
//     from a current home, makes the claimer yield and ask again. A claimer
//     answers a claim from a larger id with its own claim again (the larger
//     one may have started after the first claim went by), and a home
//     answers every claim with an assertion. Otherwise the claimer wins,
//     calls PublishSpec.NewHome and starts answering P.home.<topic>.
//
// Every node subscribes to P.d before it claims, so of two concurrent
// claimers the larger id always hears the smaller's claim within its window
// and yields; two homes could only arise if a message took longer than
// ClaimWindow to cross NATS (or across a partition), which a home's
// assertion then reports (logged as rejected). When the home goes
// (its publication closes, its node leaves or times out) every other
// publisher of the topic gets OnHomeLost with ErrHomeLost; failover is
// later work.
//
// # Queue-pair exchange
//
// Node.Connect(ctx, node, ConnectRequest) sends the requester's
// rdma.Endpoint to P.qp.<node>; the target's AcceptFunc (the home's,
// a subscriber's or a publisher's) creates and connects its queue pair and
// replies with its endpoint and region descriptor. Node.ProviderFor picks
// the provider per peer: shm on the same host, else tcp, or as configured.
//
// # Micro service
//
// Each node registers the NATS micro service "tickbus" (metadata: node, host,
// prefix) so $SRV.PING, $SRV.INFO and $SRV.STATS list nodes; the stats
// endpoint data is the node's Stats.
package bus
