package bus

import (
	"context"
	"errors"
	"time"
)

// subject joins the prefix and tokens with dots.
func (n *Node) subject(tokens ...string) string {
	s := n.cfg.Prefix
	for _, t := range tokens {
		s += "." + t
	}
	return s
}

// publish sends w (send), unless this node already said goodbye.
func (n *Node) publish(subj string, w *wireMsg) {
	n.byeMu.RLock()
	defer n.byeMu.RUnlock()
	if n.byeSent {
		return // the goodbye was this node's last word
	}
	n.send(subj, w)
}

// sayGoodbye publishes the goodbye as this node's last message.
func (n *Node) sayGoodbye() {
	n.byeMu.Lock()
	defer n.byeMu.Unlock()
	n.send(n.subject("d", kindBye), &wireMsg{Kind: kindBye})
	n.byeSent = true
}

// send stamps w with this node and publishes it; errors are logged (the
// connection buffers while reconnecting).
func (n *Node) send(subj string, w *wireMsg) {
	b, err := n.seal(subj, w)
	if err == nil {
		err = n.nc.Publish(subj, b)
	}
	if err != nil {
		if ok, held := n.limiter.allow("publish/"+w.Kind, time.Now()); ok {
			n.log.Warn().Err(err).Str("subject", subj).Int("suppressed", held).Msg("bus: publish failed")
		}
	}
}

// badInput counts and logs (rate-limited per subject kind and class, and
// per peer for a security refusal) a message that was ignored.
func (n *Node) badInput(kind string, err error) {
	n.counters.ignore(kind)
	class := errClass(err)
	key, peer := kind+"/"+class, ""
	if r := (*refusal)(nil); errors.As(err, &r) {
		n.counters.reject(kind)
		key, peer = key+"/"+r.peer, r.peer
	}
	if ok, held := n.limiter.allow(key, time.Now()); ok {
		n.log.Warn().Str("kind", kind).Str("class", class).Str("peer", peer).Int("suppressed", held).
			Err(err).Msg("bus: ignored bad message")
	}
}

// flush waits until the server has processed what was sent, bounded by ctx
// and RequestTimeout.
func (n *Node) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	return n.nc.FlushWithContext(ctx)
}
