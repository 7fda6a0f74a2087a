package bus

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/micro"
)

// ServiceName is the NATS micro service every node registers, so that
// `nats micro ls` and requests to $SRV.PING.tickbus / $SRV.INFO.tickbus /
// $SRV.STATS.tickbus list the nodes and their stats.
const ServiceName = "tickbus"

// ServiceVersion is the version the micro service reports.
const ServiceVersion = "0.1.0"

// addService registers the micro service with two endpoints: "connect" on
// P.qp.<node> (queue-pair exchange) and "info" on P.info.<node> (this node's
// view: Stats as JSON). Both carry the node's Stats in $SRV.STATS.
func (n *Node) addService() (micro.Service, error) {
	svc, err := micro.AddService(n.nc, micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "tickbus node: discovery, queue-pair exchange, stats",
		Metadata: map[string]string{
			"node":   n.self.ID,
			"host":   n.self.HostID,
			"prefix": n.cfg.Prefix,
		},
		QueueGroupDisabled: true,
		StatsHandler:       func(*micro.Endpoint) any { return n.Stats() },
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			n.log.Warn().Str("subject", e.Subject).Str("error", e.Description).Msg("bus: micro service error")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: micro service: %v", ErrConnect, err)
	}
	if err := svc.AddEndpoint("connect", micro.HandlerFunc(n.onConnect),
		micro.WithEndpointSubject(n.subject("qp", n.self.ID)), micro.WithEndpointQueueGroupDisabled()); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("%w: micro endpoint connect: %v", ErrConnect, err)
	}
	if err := svc.AddEndpoint("info", micro.HandlerFunc(func(r micro.Request) {
		b, _ := json.Marshal(n.Stats())
		_ = r.Respond(b)
	}), micro.WithEndpointSubject(n.subject("info", n.self.ID)), micro.WithEndpointQueueGroupDisabled()); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("%w: micro endpoint info: %v", ErrConnect, err)
	}
	return svc, nil
}
