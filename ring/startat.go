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

// FirstWritten is the first sequence from the reader's next one up to
// (not including) limit, within one ring, whose slot is written (holds it
// or a later lap); 0 if none is. A ring held undelivered while its start
// was being learnt uses it to start at what a writer already put there,
// not beyond it. It costs one load per slot: call it from the polling
// goroutine, off the hot path.
func (r *Reader) FirstWritten(limit uint64) uint64 {
	return r.firstPresentBelow(r.next, limit)
}
