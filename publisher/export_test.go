package publisher

// HoldPublish enters p's publish gate as a publish under way on another
// goroutine does, and returns what ends that publish: it flushes the
// writer (touching its memory, as a publish returning late does) and
// leaves the gate.
func HoldPublish(p *Publisher) (release func() error) {
	if !p.gate.Enter() {
		return func() error { return nil }
	}
	return func() error {
		defer p.gate.Leave()
		return p.w.Flush()
	}
}
