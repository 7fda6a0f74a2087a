package main

import (
	"context"
	"time"

	"github.com/tickbus/tickbus"
)

func main() {
	c, err := tickbus.Connect(context.Background(), tickbus.WithEmbeddedNATS("127.0.0.1:4222"))
	if err != nil {
		panic(err)
	}
	pub, err := c.Publisher("demo")
	for px := int64(100 * tickbus.PriceScale); err == nil; px += tickbus.PriceScale / 100 {
		_, err = pub.PublishTick(&tickbus.Tick{Instrument: 7, Kind: tickbus.Trade, Price: px, Size: 10})
		time.Sleep(time.Millisecond)
	}
	panic(err)
}
