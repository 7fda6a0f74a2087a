// Package bus is tickbus's control plane on NATS: a Node per process, its
// NATS connection, discovery of publishers and subscribers, the queue-pair
// and region exchange before the first write, topic homes, heartbeats and
// stats. It never touches ticks: the data plane runs over rdma and keeps
// running while NATS is away.
//
// # Connection
//
// Open with a zero NATSConfig runs an embedded nats-server (loopback, random
// port, JetStream in a temporary directory removed at Close) that requires
// this user's token (EmbeddedToken, kept in RuntimeDir); Node.ClientURL gives its URL with
// the token so that other nodes and NATS tools can join it, and a node
// dialling a loopback server without credentials presents the token itself
// (NATSConfig.EmbeddedCertFile makes the embedded server TLS only). With URLs the node connects to an
// external server or cluster with user/password, token, nkey seed file,
// creds file and TLS as configured (NATSConfig.WaitForServer lets Open wait
// for a server that is not up yet). It reconnects forever with capped,
// jittered exponential backoff; after a reconnect it re-announces everything
// and asks who is there.
//
// # Topics
//
// A topic is up to 8 tokens of [A-Za-z0-9_:-] joined by dots
// ("md.nasdaq.itch"), 128 bytes at most (CheckTopic). A subject carries a
// topic only as its tail, or followed by exactly one id token
// (P.stats.<topic>.<subscriber>), so no two topics share a subject.
// ParsePattern and Pattern.Match give NATS-style patterns over topics
// ("md.nasdaq.>", "md.*.itch"), which subscriber.Wildcard subscribes to.
//
// # Subjects (P is Config.Prefix, default "tickbus")
//
//	P.d.hb              heartbeat, every HeartbeatInterval
//	P.d.bye             goodbye on Close: peers drop the node at once
//	P.d.who             who is there (all, or one topic): everyone re-announces
//	                    (a new subscriber asks only for publishers, a new publisher only for subscribers)
//	P.d.sub.<topic>     subscriber announced (id, mode, ring descriptor) or withdrawn
//	P.d.pub.<topic>     publisher announced (id, data) or withdrawn
//	P.d.home.<topic>    (claims of older versions, ignored; homes are elected in JetStream)
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
// gets a fresh timeout. Nor does ageing count time this process did not
// run, or time it was behind reading its discovery messages (what a peer
// sent meanwhile may still wait unread): see heartbeatLoop.
//
// # Unheard peers
//
// A peer dropped by heartbeat (ErrPeerLost) is one the control plane
// cannot hear, not necessarily a dead one, and the bus tells its owners so
// apart from a peer that is gone (withdrew, left, restarted): one rule in
// unheard.go for both sides. A subscriber of a local publication, or a
// publisher of a local subscription, lost that way while the owner's
// liveness check (PublishSpec.SubscriberReachable,
// SubscribeSpec.PublisherReachable: are its queue pairs up?) says yes is
// held (OnSubscriberUnheard, OnPublisherUnheard) and not reported gone.
// Its node heard again re-announcing it unchanged, it is held no longer
// (OnSubscriberHeard, OnPublisherHeard; no second OnSubscriber or
// OnPublisher). It is reported gone, once, when the check fails (looked
// at every 50 ms; the reason wraps ErrPeerLost and ErrHoldFailed), when
// Config.UnheardHold passes (30 s by default; ErrHoldEnded), or at once
// when its node says goodbye, is heard as another incarnation, or it
// withdraws or is re-announced changed. A negative UnheardHold, or no
// liveness check, reports a lost peer gone at once. Every decision runs
// on the owner's event queue, in order with its other callbacks.
//
// # Wire format
//
// Every message is one JSON message, version WireVersion, inside a signed
// envelope (EnvelopeVersion), at most MaxMessageSize bytes; descriptors
// inside it are opaque bytes versioned by their owners (rdma.Endpoint's
// binary form, ring descriptors). Anything that does not decode, has another
// version, is too large, is on the wrong subject, or is rejected by a spec's
// validator is ignored, counted in Stats.Ignored per subject kind, and logged
// at most once per LogEvery per subject kind and error class.
//
// # Identity and authorization
//
// Each node signs every message with its user nkey (Config.Key, the seed of
// NATSConfig.NKeySeedFile or CredsFile, a key kept per configured node id,
// or a generated one). A receiver checks the signature over the subject and
// the message, binds a node id to the first key it sees for it, and refuses
// replays (a per-node sequence within a window, an incarnation, a send time
// within MaxClockSkew) and identities Config.Authorization does not allow on
// the topic; each refusal counts in Stats.Rejected (and Stats.Ignored) and
// is logged once per peer, kind and class. Connect requests are admitted the
// same way before any AcceptFunc runs. SECURITY.md has the threat model.
//
// # Topic homes
//
// A topic's home (sequencer counter and journal) is a role, decided by
// JetStream (lease.go): whoever holds the topic's key in the key-value
// bucket <prefix>_homes is home, and the revision of its Create is the
// epoch. Publish (and Publication.Rehome after a failover) decides so:
//
//  1. a home already on this node is used;
//  2. a lease held, whose holder has written its record, names the home;
//  3. no lease: Create takes it (unless Config.Homes names another node),
//     then a compare-and-set of the home record in <prefix>_seqs fences
//     the predecessor and fixes the epoch's first sequence at the last
//     reservation written; PublishSpec.NewHome makes the counter there.
//
// The home renews its lease every LeaseTTL/4 (Update on the last
// revision); a renewal that finds the lease taken, or none for 3/4 of the
// TTL, loses the home before the lease can expire elsewhere. It extends its
// reservation (ReserveChunk sequences) before its counter reaches it. A
// closing home first writes the counter it ended at into its record
// (PublishSpec.EndCounter, HomeInfo.End: subscribers name what they never
// got below it), then deletes its lease, so the others take over at once;
// a dead one's lease expires. Every node watches both buckets: local publications
// get OnHomeLost when the lease goes or a newer epoch appears, and OnHome
// with every record; subscriptions get OnHome. A watcher is started again
// after every reconnect, when it ends, and when a probe of its bucket's
// last revision (one request per bucket every second) finds it deaf; a
// bucket the server lost is made again. Each topic's record is also
// re-read every 5 s, as a backstop only (Stats.WatcherRestarts
// counts the restarts; see watch.go). No timing window of ours
// decides anything: JetStream's Create and compare-and-set do (Raft in a
// cluster). A server without JetStream is refused (ErrNoJetStream).
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
