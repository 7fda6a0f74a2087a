// Package swcq is the software completion queue shared by the shm and tcp
// providers: a bounded, lock-free queue of completions with many producers
// (posting goroutines, tcp readers) and one consumer (the poller).
//
// It is Dmitry Vyukov's bounded MPMC queue restricted to one consumer: each
// slot carries a sequence; a producer claims a position with a CAS on the
// tail, writes the completion, then publishes it by storing seq = pos+1; the
// consumer reads a slot whose seq is pos+1, then frees it with seq = pos+size.
package swcq

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
)

// CQ is a software completion queue. It implements rdma.CompletionQueue.
type CQ struct {
	_     [128]byte
	tail  atomic.Uint64 // next position to claim; producers CAS it
	_     [120]byte
	head  uint64 // next position to read; the one consumer only
	_     [120]byte
	mask  uint64
	slots []slot

	closed atomic.Bool
	// Overflows counts completions dropped because the queue was full. A
	// provider reserves room before it starts an op, so this stays 0 unless a
	// caller ignores ErrSendQueueFull.
	Overflows atomic.Uint64
}

type slot struct {
	seq atomic.Uint64 // pos+1: full for the consumer; pos+size: free for the producer at pos+size
	c   rdma.Completion
}

// word is seq's 64-bit word, for release.Store64: a hand-off needs a
// release store only (a plain MOV on amd64, not sync/atomic's XCHG).
func (s *slot) word() *uint64 { return (*uint64)(unsafe.Pointer(&s.seq)) }

// atomic.Uint64 must be one bare uint64 for word: both lines fail to
// compile otherwise.
var (
	_ [unsafe.Sizeof(atomic.Uint64{}) - 8]byte
	_ [8 - unsafe.Sizeof(atomic.Uint64{})]byte
)

// New returns a CQ with room for at least depth completions (rounded up to a
// power of two).
func New(depth int) (*CQ, error) {
	if depth < 1 || depth > 1<<24 {
		return nil, fmt.Errorf("%w: CQ depth %d, want 1..%d", rdma.ErrInvalidConfig, depth, 1<<24)
	}
	n := 1
	for n < depth {
		n <<= 1
	}
	q := &CQ{mask: uint64(n - 1), slots: make([]slot, n)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q, nil
}

// Cap is the number of completions the queue holds.
func (q *CQ) Cap() int { return len(q.slots) }

// Push adds c. It returns false, and counts an overflow, when the queue is
// full. Safe from any goroutine.
func (q *CQ) Push(c rdma.Completion) bool {
	for {
		pos := q.tail.Load()
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load() // pairs with the consumer's Store(pos+size) in Poll
		switch diff := int64(seq - pos); {
		case diff == 0:
			if q.tail.CompareAndSwap(pos, pos+1) {
				s.c = c
				release.Store64(s.word(), pos+1) // pairs with the consumer's Load in Poll
				return true
			}
		case diff < 0:
			q.Overflows.Add(1)
			return false
		}
	}
}

// Poll fills buf with up to len(buf) completions and returns how many. Only
// one goroutine may poll.
func (q *CQ) Poll(buf []rdma.Completion) int {
	n := 0
	for n < len(buf) {
		s := &q.slots[q.head&q.mask]
		if s.seq.Load() != q.head+1 { // pairs with Store(pos+1) in Push
			break
		}
		buf[n] = s.c
		release.Store64(s.word(), q.head+q.mask+1) // pairs with the producer's Load in Push
		q.head++
		n++
	}
	return n
}

// Close marks the queue closed; Closed reports it. Idempotent.
func (q *CQ) Close() error {
	q.closed.Store(true)
	return nil
}

// Closed reports whether Close was called.
func (q *CQ) Closed() bool { return q.closed.Load() }
