package main

import (
	"context"
	"fmt"
	"github.com/tickbus/tickbus"
)

func main() {
	c, err := tickbus.Connect(context.Background(), tickbus.WithNATS("nats://127.0.0.1:4222"))
	if err == nil {
		err = c.Run(context.Background(), "demo", tickbus.OnTick(func(t *tickbus.Tick) { fmt.Println(t.Instrument, t.Kind, tickbus.PriceFloat(t.Price), t.Size) }))
	}
	fmt.Println(err)
}
