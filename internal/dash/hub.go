package dash

import "sync"

// hub tells event-stream clients which series changed. A client that falls
// behind keeps only the set of changed keys, never a queue, so a slow
// browser costs the server nothing but a small map.
type hub struct {
	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool
}

type client struct {
	signal chan struct{} // capacity 1: "something changed"
	mu     sync.Mutex
	dirty  map[string]struct{}
}

func newHub() *hub { return &hub{clients: map[*client]struct{}{}} }

func (h *hub) join() *client {
	c := &client{signal: make(chan struct{}, 1), dirty: map[string]struct{}{}}
	h.mu.Lock()
	if !h.closed {
		h.clients[c] = struct{}{}
	}
	h.mu.Unlock()
	return c
}

func (h *hub) leave(c *client) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

func (h *hub) mark(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		c.mu.Lock()
		c.dirty[key] = struct{}{}
		c.mu.Unlock()
		select {
		case c.signal <- struct{}{}:
		default:
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	h.clients = map[*client]struct{}{}
	h.mu.Unlock()
}

func (c *client) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.dirty))
	for k := range c.dirty {
		keys = append(keys, k)
	}
	clear(c.dirty)
	return keys
}
