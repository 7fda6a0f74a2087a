package publisher

import (
	"errors"
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrClosed: the publisher was closed.
	ErrClosed = errors.New("publisher: closed")
	// ErrTooLarge: a message larger than the topic's slot payload. Nothing
	// was published.
	ErrTooLarge = errors.New("publisher: message larger than the slot payload")
	// ErrMixedProviders: a publisher asked to claim on this home over a
	// provider that cannot share the counter with the home's own (verbs
	// atomics are atomic only among themselves).
	ErrMixedProviders = errors.New("publisher: providers cannot be mixed on this home")
	// ErrNoHome: the topic's home went away, or did not answer a claim
	// within Config.Timeout, and no home that answers was reachable within
	// Config.FailoverTimeout. Nothing was published. Retryable: the next
	// publish tries again (see failover.go).
	ErrNoHome = errors.New("publisher: no home for the topic (failover in progress); retry")
)
