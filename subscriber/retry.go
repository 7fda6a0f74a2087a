package subscriber

import (
	"context"
	"errors"
	"time"

	"github.com/tickbus/tickbus/bus"
)

// errPublisherGone: a publisher left before what we asked of it was done.
var errPublisherGone = errors.New("subscriber: publisher gone")

// untilClosed is a context that ends at Close or at its cancel.
func (s *Subscriber) untilClosed() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// connectRetrying sends req to peer until it is answered: each attempt
// bounded (5 s), the waits between them growing by 100 ms to 1 s, for as
// long as ctx lives and still returns nil (its error ends the tries and is
// returned). A loaded host can take seconds to answer, or to have what is
// asked for. firstFailed, if not nil, runs once after the first refusal;
// after 5 s without an answer the wait is logged once, naming what.
func (s *Subscriber) connectRetrying(ctx context.Context, peer string, req bus.ConnectRequest, what string, still func() error, firstFailed func()) (bus.ConnectReply, error) {
	start, warned := time.Now(), false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return bus.ConnectReply{}, ctx.Err()
			case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
			}
		}
		if err := still(); err != nil {
			return bus.ConnectReply{}, err
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		rep, err := s.node.Connect(actx, peer, req)
		acancel()
		if err == nil {
			return rep, nil
		}
		if attempt == 0 && firstFailed != nil {
			firstFailed()
		}
		if !warned && time.Since(start) > 5*time.Second {
			warned = true
			s.log.Info().Err(err).Str("peer", peer).Msg("subscriber: " + what + " not attached yet; still trying")
		}
	}
}
