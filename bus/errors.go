package bus

import "errors"

// Sentinel errors. Test them with errors.Is.
var (
	// ErrClosed: the node, publication or subscription is closed.
	ErrClosed = errors.New("bus: closed")
	// ErrInvalidConfig: a Config or spec field is out of range; the message
	// names the key, the value and what was expected.
	ErrInvalidConfig = errors.New("bus: invalid configuration")
	// ErrConnect: the NATS connection (or the embedded server) could not be
	// set up.
	ErrConnect = errors.New("bus: cannot connect to NATS")
	// ErrMalformed: a message on a bus subject does not decode or does not
	// validate.
	ErrMalformed = errors.New("bus: malformed message")
	// ErrUnknownVersion: a message carries a wire version this node does not
	// speak.
	ErrUnknownVersion = errors.New("bus: unknown message version")
	// ErrTooLarge: a message is larger than MaxMessageSize.
	ErrTooLarge = errors.New("bus: message too large")
	// ErrRejected: a well-formed announcement failed the owner's validator
	// (for example a ring descriptor the ring package cannot parse).
	ErrRejected = errors.New("bus: announcement rejected by validator")
	// ErrDuplicate: the topic already has a publication or subscription with
	// this id on this node.
	ErrDuplicate = errors.New("bus: duplicate id on this node")
	// ErrNoHome: no home for the topic could be found or claimed before the
	// context ended.
	ErrNoHome = errors.New("bus: no home for topic")
	// ErrHomeLost: the topic's home went away (its lease was deleted or
	// expired, it lost the lease, or its node left or timed out). Retryable:
	// Publication.Rehome finds or becomes the next home.
	ErrHomeLost = errors.New("bus: topic home lost")
	// ErrPeerLost: a peer's heartbeats stopped for longer than the timeout.
	ErrPeerLost = errors.New("bus: peer lost (heartbeat timeout)")
	// ErrHoldFailed and ErrHoldEnded say why a subscriber or publisher
	// held while its node was unheard (Config.UnheardHold) is gone after
	// all: its owner's liveness check said its data plane failed, or the
	// hold passed. The reason given wraps ErrPeerLost too.
	ErrHoldFailed = errors.New("bus: its data plane failed while its node was unheard")
	ErrHoldEnded  = errors.New("bus: unheard for the whole hold (Config.UnheardHold)")
	// ErrPeerLeft: a peer said goodbye.
	ErrPeerLeft = errors.New("bus: peer left")
	// ErrPeerRestarted: a peer came back with a new incarnation; everything
	// its old incarnation announced is gone.
	ErrPeerRestarted = errors.New("bus: peer restarted")
	// ErrWithdrawn: a publisher or subscriber withdrew from the topic.
	ErrWithdrawn = errors.New("bus: withdrawn from topic")
	// ErrUnknownTarget: a connect request named a topic, publisher,
	// subscriber or home the target node does not have.
	ErrUnknownTarget = errors.New("bus: connect target does not exist")
	// ErrConnectRefused: the target's accept handler returned an error.
	ErrConnectRefused = errors.New("bus: connect refused by peer")
	// ErrNoJetStream: the NATS server has no JetStream, which tickbus needs
	// to elect each topic's home (a key-value bucket). Run nats-server -js.
	ErrNoJetStream = errors.New("bus: JetStream is not enabled on the NATS server")
	// ErrNoPeer: no node answered a request (not running or unreachable).
	ErrNoPeer = errors.New("bus: peer did not answer")
	// ErrUnauthenticated: a message is unsigned, mis-signed, or names a key
	// other than the one that signed it.
	ErrUnauthenticated = errors.New("bus: unsigned or mis-signed message")
	// ErrReplayed: a signed message was seen before, is too old for the
	// replay window, or comes from an older incarnation.
	ErrReplayed = errors.New("bus: replayed or stale message")
	// ErrIdentity: a message names a node id bound to another key.
	ErrIdentity = errors.New("bus: node id bound to another key")
	// ErrForbidden: the signer's identity is not allowed on the topic
	// (Config.Authorization).
	ErrForbidden = errors.New("bus: identity not allowed on topic")
)
