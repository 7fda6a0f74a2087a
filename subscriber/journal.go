package subscriber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
)

// errSuperseded: a newer epoch's journal replaces the one being attached.
var errSuperseded = errors.New("subscriber: epoch superseded")

// onHome: the topic's home record (its epoch and reservation). A new epoch
// makes the reader report what the old one reserved and never wrote as
// one ring.EventEpoch; the reservation bounds which stamps it trusts.
func (s *Subscriber) onHome(hi bus.HomeInfo) {
	s.reader.SetEpoch(hi.Start, hi.Reserved)
	s.log.Debug().Uint64("epoch", hi.Epoch).Uint64("start", hi.Start).Uint64("reserved", hi.Reserved).Str("home", hi.Node.ID).
		Msg("subscriber: home record")
	if len(hi.Descriptor) > 0 && hi.Epoch != s.journalEpoch {
		s.journalEpoch = hi.Epoch
		s.homeEpoch.Store(hi.Epoch)
		s.spawn(func() { s.attachJournal(hi) })
	}
}

// attachJournal connects a queue pair to the home's journal and gives it
// to the reader, so gaps and overruns are recovered from it and a claimant
// that died on the last tick of a burst is found (the reader READs the
// home's counter). Each new epoch's home replaces the last one's journal.
func (s *Subscriber) attachJournal(hi bus.HomeInfo) {
	defer s.wg.Done()
	var hd ring.HomeDesc
	if err := hd.UnmarshalBinary(hi.Descriptor); err != nil {
		s.reader.DropJournal()
		s.log.Warn().Err(err).Str("home", hi.Node.ID).Msg("subscriber: home descriptor unreadable; no journal")
		return
	}
	// Whatever keeps this epoch's journal from being attached, the old
	// epoch's goes: it holds nothing of the new epoch, and a home that went
	// away would make every recovery wait for its READs (a chaos run's
	// lossy subscriber delivered nothing for 30 s).
	if hd.JournalSlots == 0 {
		s.reader.DropJournal()
		return
	}
	if prov := s.node.ProviderFor(hi.Node); prov != s.dev.Provider() {
		s.reader.DropJournal()
		s.log.Info().Str("home", hi.Node.ID).Str("provider", prov).Msg("subscriber: the home's journal is on another provider than the ring; not attached")
		return
	}
	// confined: the home reaches nothing of this node through it
	qp, err := s.dev.CreateQP(ring.Confine(s.dev, rdma.QPConfig{SendCQ: s.cq, RecvCQ: s.cq, SendDepth: 16, RecvDepth: 16}))
	if err != nil {
		s.log.Warn().Err(err).Msg("subscriber: journal queue pair")
		return
	}
	ctx, cancel := s.untilClosed()
	defer cancel()
	current := func() bool { return s.homeEpoch.Load() == hi.Epoch }
	err = func() error {
		// The record can come before the home answers, and a loaded host
		// can take seconds to: retry until the journal is attached, a
		// newer epoch replaces this one or Close.
		rep, err := s.connectRetrying(ctx, hi.Node.ID, bus.ConnectRequest{Topic: s.cfg.Topic, Kind: bus.TargetHome, Endpoint: qp.LocalEndpoint()},
			fmt.Sprintf("journal of epoch %d", hi.Epoch),
			func() error {
				if !current() {
					return fmt.Errorf("%w: epoch %d superseded before its journal was attached", errSuperseded, hi.Epoch)
				}
				return nil
			},
			s.reader.DropJournal) // the old epoch's: it holds nothing of this one, and its home may be gone
		if err != nil {
			return err
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if err := qp.Connect(cctx, rep.Endpoint); err != nil {
			return err
		}
		var rd ring.HomeDesc // the home as registered on this provider's device
		if err := rd.UnmarshalBinary(rep.Region); err != nil {
			return err
		}
		if !current() {
			return fmt.Errorf("%w: epoch %d superseded before its journal was attached", errSuperseded, hi.Epoch)
		}
		return s.reader.SetJournal(s.dev, qp, rd, 100*time.Millisecond)
	}()
	if err != nil {
		_ = qp.Close()
		if errors.Is(err, errSuperseded) { // the newer epoch's attach owns the reader's journal
			s.log.Info().Err(err).Str("home", hi.Node.ID).Msg("subscriber: journal not attached")
			return
		}
		s.reader.DropJournal()
		s.log.Info().Err(err).Str("home", hi.Node.ID).Msg("subscriber: journal not attached")
		return
	}
	if !s.keepQP(qp) {
		return
	}
	s.journalAt.Store(hi.Epoch)
	s.log.Info().Str("home", hi.Node.ID).Uint64("epoch", hi.Epoch).Uint32("slots", hd.JournalSlots).Msg("subscriber: journal attached")
}

// keepQP keeps qp (to a home's journal or a publisher's credit cells) for
// Close to close, or closes it at once and reports false when Close has
// already run.
func (s *Subscriber) keepQP(qp rdma.QueuePair) bool {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.journalQPs = append(s.journalQPs, qp)
	}
	s.mu.Unlock()
	if closed {
		_ = qp.Close()
	}
	return !closed
}
