package tickbus

import (
	"errors"
	"fmt"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

// Sentinel errors. An error of this package's calls is one of these, or
// wraps one, whichever package below raised it (the bus, the ring, a
// device); test them with errors.Is. Publish's errors are these values
// themselves, never wrapped, so the hot path does not allocate. A failure
// of no kind listed here (a device's own) is returned prefixed "tickbus: ".
var (
	// ErrInvalidOption: an option or argument is out of range; the message
	// names it, the value and what was expected. Nothing was changed.
	ErrInvalidOption = errors.New("tickbus: invalid option")
	// ErrConnect: the NATS server (or the embedded one) could not be reached
	// or refused the credentials.
	ErrConnect = errors.New("tickbus: cannot connect")
	// ErrClosed: the client, publisher or subscription was closed.
	ErrClosed = errors.New("tickbus: closed")
	// ErrPollBusy: a subscription's Close gave up waiting for the Poll
	// under way (a handler that blocks, or that called Close itself); its
	// ring is left mapped, and polling stops once that Poll returns.
	ErrPollBusy = errors.New("tickbus: close: a poll did not return")
	// ErrTooLarge: a message larger than the topic's slot payload. Nothing
	// was published.
	ErrTooLarge = errors.New("tickbus: message larger than the slot payload")
	// ErrBatchTooLarge: a batch of more messages than the publisher's
	// maximum batch (WithMaxBatch). Nothing was published.
	ErrBatchTooLarge = errors.New("tickbus: batch larger than the publisher's maximum")
	// ErrInvalidTick: a tick the encoder refuses (instrument 0, unknown
	// kind, undefined flags, malformed venue), or a message that is not a
	// well-formed tick. Nothing was published.
	ErrInvalidTick = errors.New("tickbus: invalid tick")
	// ErrLost: PublishAt found the sequence already published by another
	// publisher (the other feed line won): drop the copy.
	ErrLost = errors.New("tickbus: sequence already published by another publisher")
	// ErrInvalidSequence: PublishAt with sequence 0 or one too far ahead.
	ErrInvalidSequence = errors.New("tickbus: invalid sequence for PublishAt")
	// ErrBackPressure: a reliable subscriber had no room before the
	// publish timeout.
	ErrBackPressure = errors.New("tickbus: reliable subscriber has no room")
	// ErrTimeout: a wait below the publisher timed out. A publish whose
	// claim the home did not answer in time returns ErrNoHome (retryable)
	// after failover found no home that answers.
	ErrTimeout = errors.New("tickbus: timed out")
	// ErrNoHome: the topic has no reachable home (the holder of its
	// sequence counter) now: the home went away and no successor was
	// reachable within the failover timeout, or the home a new publisher
	// was told of was gone. Nothing was published. Retryable: the next
	// publish, or Client.Publisher, tries again.
	ErrNoHome = errors.New("tickbus: no home for the topic (failover in progress); retry")
	// ErrHomeFailed was the error of a publish whose link to the home
	// failed.
	//
	// Deprecated: such a publish now fails over to the topic's next home,
	// and returns ErrNoHome if there is none. No call returns ErrHomeFailed.
	ErrHomeFailed = errors.New("tickbus: the topic's home is unreachable")
	// ErrNoJetStream: the NATS server runs without JetStream, where
	// tickbus elects each topic's home (the embedded server has it).
	ErrNoJetStream = errors.New("tickbus: the NATS server has no JetStream")
	// ErrForbidden: the bus's security refused: this identity may not
	// publish or subscribe on the topic (WithAllowPublish,
	// WithAllowSubscribe), a node id belongs to another key, or a message
	// was unsigned, mis-signed or replayed.
	ErrForbidden = errors.New("tickbus: refused by the bus's security")
	// ErrDuplicate: the client already has a publisher or subscription of
	// that name on the topic (WithPublisherName, WithSubscriberName).
	ErrDuplicate = errors.New("tickbus: name already used on the topic in this client")
	// ErrRefused: a peer refused a connect (unknown topic, provider
	// unavailable, identity not allowed).
	ErrRefused = errors.New("tickbus: refused")
)

// pubErr maps the errors of a publish to this package's sentinels without
// allocating; anything else is wrapped (off the hot path).
func pubErr(err error) error {
	switch err {
	case nil:
		return nil
	case publisher.ErrTooLarge, ring.ErrPayloadTooLarge:
		return ErrTooLarge
	case ring.ErrBatchTooLarge:
		return ErrBatchTooLarge
	case ring.ErrLost:
		return ErrLost
	case ring.ErrInvalidSequence:
		return ErrInvalidSequence
	case ring.ErrBackPressure:
		return ErrBackPressure
	case ring.ErrTimeout:
		return ErrTimeout
	case publisher.ErrNoHome, ring.ErrFenced, ring.ErrHomeFailed:
		return ErrNoHome
	case ring.ErrClosed, publisher.ErrClosed:
		return ErrClosed
	}
	return wrap(err)
}

// kinds maps the errors of the packages below to this package's sentinels,
// first match wins.
var kinds = []struct{ from, to error }{
	{bus.ErrNoJetStream, ErrNoJetStream},
	{bus.ErrForbidden, ErrForbidden},
	{bus.ErrIdentity, ErrForbidden},
	{bus.ErrUnauthenticated, ErrForbidden},
	{bus.ErrReplayed, ErrForbidden},
	{bus.ErrDuplicate, ErrDuplicate},
	{bus.ErrInvalidConfig, ErrInvalidOption},
	{publisher.ErrInvalidConfig, ErrInvalidOption},
	{subscriber.ErrInvalidConfig, ErrInvalidOption},
	{ring.ErrInvalidConfig, ErrInvalidOption},
	{link.ErrInvalidProfile, ErrInvalidOption},
	{link.ErrUnsupported, ErrInvalidOption},
	{bus.ErrConnect, ErrConnect},
	{bus.ErrConnectRefused, ErrRefused},
	{subscriber.ErrRefused, ErrRefused},
	{publisher.ErrMixedProviders, ErrRefused},
	{publisher.ErrTooLarge, ErrTooLarge},
	{ring.ErrPayloadTooLarge, ErrTooLarge},
	{ring.ErrBatchTooLarge, ErrBatchTooLarge},
	{tick.ErrInvalid, ErrInvalidTick},
	{tick.ErrMalformed, ErrInvalidTick},
	{ring.ErrLost, ErrLost},
	{ring.ErrInvalidSequence, ErrInvalidSequence},
	{ring.ErrBackPressure, ErrBackPressure},
	{ring.ErrTimeout, ErrTimeout},
	{publisher.ErrNoHome, ErrNoHome},
	{ring.ErrFenced, ErrNoHome},
	{ring.ErrHomeFailed, ErrNoHome},
	{bus.ErrNoHome, ErrNoHome},
	// a new publisher's dial of the home it was told of
	{bus.ErrUnknownTarget, ErrNoHome},
	{bus.ErrNoPeer, ErrNoHome},
	{publisher.ErrClosed, ErrClosed},
	{subscriber.ErrClosed, ErrClosed},
	{subscriber.ErrPollBusy, ErrPollBusy},
	{ring.ErrClosed, ErrClosed},
	{link.ErrClosed, ErrClosed},
	{bus.ErrClosed, ErrClosed},
}

// wrap gives err this package's sentinel for its kind, keeping its message
// and chain. An error already of this package is returned as it is.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range kinds {
		if errors.Is(err, k.to) {
			return err
		}
	}
	for _, k := range kinds {
		if errors.Is(err, k.from) {
			return fmt.Errorf("%w: %w", k.to, err)
		}
	}
	return fmt.Errorf("tickbus: %w", err)
}

// optErr is an option's error: it names the option, the value and what
// was expected.
func optErr(option string, value any, want string) error {
	return fmt.Errorf("%w: %s(%v): want %s", ErrInvalidOption, option, value, want)
}
