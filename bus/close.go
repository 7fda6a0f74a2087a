package bus

import (
	"errors"
	"fmt"
	"os"
)

// Close withdraws every publication and subscription, says goodbye (peers
// drop this node at once), stops the micro service, closes the connection
// and stops the embedded server. Idempotent; concurrent calls wait for the
// first.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	n.mu.Lock()
	n.closed = true // from now on Publish, Subscribe and connects to us fail
	var pubs []*Publication
	var subs []*Subscription
	for _, m := range n.localPubs {
		for _, p := range m {
			pubs = append(pubs, p)
		}
	}
	for _, m := range n.localSubs {
		for _, s := range m {
			subs = append(subs, s)
		}
	}
	n.mu.Unlock()
	var errs []error
	for _, p := range pubs {
		errs = append(errs, p.Close())
	}
	for _, s := range subs {
		errs = append(errs, s.Close())
	}
	n.sayGoodbye()
	if n.afterBye != nil {
		n.afterBye()
	}
	n.cancel()
	if err := n.svc.Stop(); err != nil && n.connected.Load() {
		errs = append(errs, fmt.Errorf("bus: stop micro service: %w", err))
	}
	if err := n.nc.FlushTimeout(n.cfg.RequestTimeout); err != nil && n.connected.Load() {
		errs = append(errs, fmt.Errorf("bus: flush goodbye: %w", err))
	}
	n.nc.Close()
	n.connected.Store(false)
	n.wg.Wait()
	n.events.close()
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		if err := os.RemoveAll(n.srvDir); err != nil {
			errs = append(errs, fmt.Errorf("bus: remove the embedded JetStream store: %w", err))
		}
	}
	n.log.Info().Msg("bus: node closed")
	return errors.Join(errs...)
}
