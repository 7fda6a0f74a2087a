package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// Connect asks node to connect a queue pair to req.Endpoint and returns its
// side: the queue-pair and region exchange that comes before the first
// write. It fails with ErrNoPeer (node not there), ErrUnknownTarget (no
// such home, publisher or subscriber on it), ErrConnectRefused (its accept
// handler failed) or ErrMalformed (its reply did not decode).
func (n *Node) Connect(ctx context.Context, node string, req ConnectRequest) (ConnectReply, error) {
	if err := checkToken("node", node); err != nil {
		return ConnectReply{}, err
	}
	if !req.Kind.valid() {
		return ConnectReply{}, fmt.Errorf("%w: ConnectRequest.Kind %q, want home, subscriber or publisher", ErrInvalidConfig, req.Kind)
	}
	ep, err := req.Endpoint.MarshalBinary()
	if err != nil {
		return ConnectReply{}, fmt.Errorf("%w: ConnectRequest.Endpoint: %w", ErrInvalidConfig, err)
	}
	if len(req.Data) > maxBlob {
		return ConnectReply{}, fmt.Errorf("%w: ConnectRequest.Data of %d bytes, want at most %d", ErrInvalidConfig, len(req.Data), maxBlob)
	}
	w := &wireMsg{Kind: kindConnect, Node: nodeOf(n.self), Topic: req.Topic, Target: string(req.Kind), ID: req.ID, EP: ep, Data: req.Data}
	if err := w.validate(); err != nil { // topic and id must be tokens, as the peer will check
		return ConnectReply{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	r, err := n.request(ctx, n.subject("qp", node), w, "acc")
	if err == nil && r.Node.ID != node {
		err = &refusal{peer: r.Node.ID, err: fmt.Errorf("%w: connect to %s answered by %s", ErrIdentity, node, r.Node.ID)}
		n.badInput("acc", err)
	}
	if err != nil {
		n.counters.connectsFailed.Add(1)
		return ConnectReply{}, err
	}
	switch r.Kind {
	case kindAccept:
		n.counters.connectsMade.Add(1)
		return ConnectReply{Endpoint: r.ep, Region: r.Desc, Data: r.Data}, nil
	case kindError:
		n.counters.connectsFailed.Add(1)
		return ConnectReply{}, errorFromWire(r)
	}
	n.counters.connectsFailed.Add(1)
	err = fmt.Errorf("%w: connect reply of kind %q", ErrMalformed, r.Kind)
	n.badInput("acc", err)
	return ConnectReply{}, err
}

// onConnect serves P.qp.<this node> (a micro endpoint, so $SRV.STATS counts
// requests and errors). The accept handler runs on its own goroutine.
func (n *Node) onConnect(req micro.Request) {
	n.counters.messagesIn.Add(1)
	w, err := n.open(req.Subject(), req.Data())
	if err == nil && w.Kind != kindConnect {
		err = fmt.Errorf("%w: kind %q on connect subject", ErrMalformed, w.Kind)
	}
	if err != nil {
		n.badInput("conn", err)
		code := codeMalformed
		if r := (*refusal)(nil); errors.As(err, &r) {
			code = codeRefused
			n.counters.connectsRefused.Add(1)
		}
		n.respond(req, &wireMsg{Kind: kindError, Code: code, Err: err.Error()})
		return
	}
	if err := n.authorize(w); err != nil {
		n.badInput("conn", err)
		n.counters.connectsRefused.Add(1)
		n.respond(req, &wireMsg{Kind: kindError, Code: codeRefused, Err: err.Error()})
		return
	}
	cr := ConnectRequest{Topic: w.Topic, Kind: TargetKind(w.Target), ID: w.ID, From: w.peer(), Endpoint: w.ep, Data: w.Data}
	accept := n.acceptFor(cr)
	if accept == nil {
		n.counters.connectsRefused.Add(1)
		n.respond(req, &wireMsg{Kind: kindError, Code: codeUnknownTarget,
			Err: fmt.Sprintf("node %s has no %s %q of topic %q", n.self.ID, cr.Kind, cr.ID, cr.Topic)})
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
		defer cancel()
		rep, err := accept(ctx, cr)
		var ep []byte
		if err == nil {
			ep, err = rep.Endpoint.MarshalBinary()
			if err == nil && (len(rep.Region) > maxBlob || len(rep.Data) > maxBlob) {
				err = fmt.Errorf("reply region or data over %d bytes", maxBlob)
			}
		}
		if err != nil {
			n.counters.connectsRefused.Add(1)
			if ok, held := n.limiter.allow("refused/"+string(cr.Kind), time.Now()); ok {
				n.log.Warn().Str("from", cr.From.ID).Str("topic", cr.Topic).Str("target", string(cr.Kind)).
					Str("id", cr.ID).Int("suppressed", held).Err(err).Msg("bus: connect refused")
			}
			n.respond(req, &wireMsg{Kind: kindError, Code: codeRefused, Err: err.Error()})
			return
		}
		n.counters.connectsServed.Add(1)
		n.respond(req, &wireMsg{Kind: kindAccept, EP: ep, Desc: rep.Region, Data: rep.Data})
	}()
}

func (n *Node) acceptFor(cr ConnectRequest) AcceptFunc {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	switch cr.Kind {
	case TargetHome:
		if s := n.homes[cr.Topic]; s != nil && s.sub != nil {
			return s.owner.spec.AcceptHome
		}
	case TargetSubscriber:
		if s := n.localSubs[cr.Topic][cr.ID]; s != nil {
			return s.spec.Accept
		}
	case TargetPublisher:
		if p := n.localPubs[cr.Topic][cr.ID]; p != nil {
			return p.spec.Accept
		}
	}
	return nil
}

func (n *Node) respond(req micro.Request, w *wireMsg) {
	if req.Reply() == "" {
		return // a plain publish on the connect subject: nobody to answer
	}
	b, err := n.seal(req.Reply(), w)
	if err == nil {
		err = req.Respond(b)
	}
	if err != nil {
		n.log.Warn().Err(err).Msg("bus: respond failed")
	}
}
