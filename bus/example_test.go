package bus_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
)

// A publisher and a subscriber on two nodes: the first node runs the
// embedded NATS server, the publisher becomes the topic's home, learns of
// the subscriber and exchanges queue-pair endpoints with it.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := bus.Open(ctx, bus.Config{NodeID: "feed", HostID: "h1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := bus.Open(ctx, bus.Config{NodeID: "engine", HostID: "h1", NATS: bus.NATSConfig{URLs: []string{a.ClientURL()}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	_, err = b.Subscribe(ctx, bus.SubscribeSpec{
		Topic: "equities", Mode: bus.ModeLossy, Ring: []byte("ring descriptor"),
		Accept: func(_ context.Context, req bus.ConnectRequest) (bus.ConnectReply, error) {
			// create a QP on req.Endpoint.Provider, Connect it to req.Endpoint
			return bus.ConnectReply{Endpoint: rdma.Endpoint{Provider: req.Endpoint.Provider, QPN: 2}, Region: []byte("ring region")}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	found := make(chan bus.SubscriberInfo, 1)
	pub, err := a.Publish(ctx, bus.PublishSpec{
		Topic:        "equities",
		NewHome:      func(context.Context, string, uint64) ([]byte, error) { return []byte("home descriptor"), nil },
		AcceptHome:   func(context.Context, bus.ConnectRequest) (bus.ConnectReply, error) { return bus.ConnectReply{}, nil },
		OnSubscriber: func(s bus.SubscriberInfo) { found <- s },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("home here:", pub.IsHome())
	s := <-found
	provider := a.ProviderFor(s.Node)
	rep, err := a.Connect(ctx, s.Node.ID, bus.ConnectRequest{Topic: s.Topic, Kind: bus.TargetSubscriber, ID: s.ID,
		Endpoint: rdma.Endpoint{Provider: provider, QPN: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("subscriber %s (%s) over %s: QP %d, %s\n", s.Key(), s.Mode, provider, rep.Endpoint.QPN, rep.Region)
	// Output:
	// home here: true
	// subscriber engine/engine (lossy) over shm: QP 2, ring region
}
