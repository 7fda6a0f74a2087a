package ring

import "fmt"

// StartAt moves a reader that has passed nothing yet forward to seq: a ring
// that joins a running topic is announced before any writer adds it, so it
// cannot know its start then; once every writer has added it, its owner
// reads the home's counter (Home.Counter on the home's host) and starts the
// reader there. Sequences before seq were published before this ring
// existed for the writers: they are not losses and are not counted (Start
// becomes seq for the ReaderStats invariant). Call it from the polling
// goroutine, before the reader delivered or reported anything; otherwise,
// or for seq behind the reader, it returns an error wrapping
// ErrInvalidConfig and changes nothing.
func (r *Reader) StartAt(seq uint64) error {
	st := r.Stats()
	switch {
	case seq == 0 || seq == StampBusy:
		return fmt.Errorf("%w: StartAt(%d), want 1..2^64-2", ErrInvalidConfig, seq)
	case st.Delivered+st.Gap+st.Overrun+st.Corrupt+st.Skip != 0:
		return fmt.Errorf("%w: StartAt(%d) after the reader passed sequences (next %d)", ErrInvalidConfig, seq, r.next)
	case seq < r.next:
		return fmt.Errorf("%w: StartAt(%d) behind the reader (next %d)", ErrInvalidConfig, seq, r.next)
	}
	r.next = seq
	r.gapSince = 0
	r.head.Store(seq) // pairs with observers' loads (Head, Stats)
	return nil
}

// FirstWritten is where a reader that has passed nothing and is to start
// at limit should start instead: the first sequence from its next one up
// to limit, within one ring, whose slot is written (holds it or a later
// lap), or limit if none is. A ring held undelivered while its start was
// being learnt starts at what a writer already put there, not beyond it.
// It costs one load per slot: call it from the polling goroutine, off the
// hot path.
func (r *Reader) FirstWritten(limit uint64) uint64 {
	if w := r.firstPresentBelow(r.next, limit); w != 0 {
		return w
	}
	return limit
}
