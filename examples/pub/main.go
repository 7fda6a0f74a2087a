package main

import (
	"context"

	"github.com/tickbus/tickbus"
)

func main() {
	c, err := tickbus.Connect(context.Background(), tickbus.WithEmbeddedNATS("127.0.0.1:4222"), tickbus.WithPublisherDefaults(tickbus.WithRate(1000)))
	for px := int64(100 * tickbus.PriceScale); err == nil; px += tickbus.PriceScale / 100 {
		err = c.Publish("demo", &tickbus.Tick{Instrument: 7, Kind: tickbus.Trade, Price: px, Size: 10})
	}
	panic(err)
}
