package config

import "errors"

// Sentinel errors. Test them with errors.Is.
var (
	// ErrUnknownKey: the file has a key the configuration does not.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrBadValue: a value has the wrong type or is out of range.
	ErrBadValue = errors.New("config: bad value")
	// ErrFile: the file cannot be read or is not one YAML mapping.
	ErrFile = errors.New("config: cannot load file")
)
