package tcp

// Outstanding is how many posted requests the peer has not answered yet,
// for tests.
func (q *QP) Outstanding() uint64 { return q.posted.Load() - q.consumed.Load() }
