package dash

import "errors"

var (
	// ErrConfig: a configuration value is unusable; the message names it.
	ErrConfig = errors.New("dash: bad config")
	// ErrClosed: the server was closed.
	ErrClosed = errors.New("dash: closed")
)
