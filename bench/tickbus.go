package bench

import (
	"context"
	"fmt"
)

// tickbusCase runs a tickbus publisher and subscriber over a provider.
type tickbusCase struct {
	pairCase
	name string
}

func newTickbusCase(name string) benchCase { return &tickbusCase{name: name} }

func (c *tickbusCase) setup(context.Context, Config) error {
	return fmt.Errorf("%w: %s: the ring data path and its provider are not in this build yet", ErrUnavailable, c.name)
}

func (c *tickbusCase) close() error { return nil }
