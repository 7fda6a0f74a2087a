package stats

import "errors"

var (
	// ErrTooLarge: an encoded message is longer than MaxMessageSize.
	ErrTooLarge = errors.New("stats: message too large")
	// ErrMalformed: the bytes are not a stats message (not JSON, wrong types,
	// unknown fields, trailing data).
	ErrMalformed = errors.New("stats: malformed message")
	// ErrVersion: the message has a version this build does not read.
	ErrVersion = errors.New("stats: unknown message version")
	// ErrInvalid: a field is out of range (empty topic, absurd counter,
	// interval ending before it starts, ...).
	ErrInvalid = errors.New("stats: invalid message")
	// ErrHistogram: the histogram is not a V2 compressed HdrHistogram of the
	// expected range and precision.
	ErrHistogram = errors.New("stats: bad histogram")
)
