package publisher_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/subscriber"
)

// New takes the bus by its roles: a missing node, untyped or a nil
// *bus.Node, is a config error, not a nil dereference later.
func TestNew_MissingNode_IsInvalidConfig(t *testing.T) {
	devs := link.NewDevices(link.DevicesConfig{HostID: "h"})
	defer devs.Close()
	ctx := context.Background()
	for name, node := range map[string]publisher.Node{"nil": nil, "nil *bus.Node": (*bus.Node)(nil)} {
		_, err := publisher.New(ctx, node, devs, publisher.Config{Topic: "x"})
		assert.ErrorIs(t, err, publisher.ErrInvalidConfig, name)
	}
	for name, node := range map[string]subscriber.Node{"nil": nil, "nil *bus.Node": (*bus.Node)(nil)} {
		_, err := subscriber.New(ctx, node, devs, subscriber.Config{Topic: "x"}, nil)
		assert.ErrorIs(t, err, subscriber.ErrInvalidConfig, name)
		_, err = subscriber.NewWildcard(ctx, node, devs, subscriber.Config{Topic: "x.>"}, nil)
		assert.ErrorIs(t, err, subscriber.ErrInvalidConfig, name)
	}
}
