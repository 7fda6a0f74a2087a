package tick

import "errors"

// Sentinel errors. Test them with errors.Is.
var (
	// ErrMalformed: the bytes are not a version-1 tick.
	ErrMalformed = errors.New("tick: malformed tick")
	// ErrShortBuffer: the destination cannot hold a tick.
	ErrShortBuffer = errors.New("tick: destination shorter than a tick")
	// ErrInvalid: a tick to encode has a field out of range.
	ErrInvalid = errors.New("tick: invalid tick")
)
