package ring

import "fmt"

// Tick is one delivered tick, or one tick to publish (PublishBatch ignores
// Seq and Publisher). On delivery Payload is a view that is valid only until
// the handler returns: into the ring itself in reliable mode, into the
// reader's own validated copy in lossy mode. Copy what you keep.
type Tick struct {
	Seq       uint64 // the topic's sequence number
	PublishNs int64  // publish time, ns since the Unix epoch, as the publisher gave it
	Type      uint16 // application's tick type
	Flags     uint16 // FlagsUser bits as published
	Publisher uint32 // WriterConfig.PublisherID of the writer that published it
	Payload   []byte
}

// EventKind says why sequences were not delivered.
type EventKind uint8

const (
	// EventGap: the sequences were claimed but not written within the gap
	// timeout (their publisher died or stalled between claim and write), and
	// the journal did not hold them.
	EventGap EventKind = iota + 1
	// EventOverrun: a lossy reader was lapped; the sequences were
	// overwritten before it read them and the journal no longer held them.
	EventOverrun
	// EventCorrupt: the slot held the right stamp but a header that fails
	// its check (length out of range, checksum mismatch).
	EventCorrupt
	// EventSkip: a publisher declared the sequences missing from its feed
	// (PublishAt past the counter), or, on a reliable ring, claimed while
	// the ring was no writer's target and a whole ring behind the counter
	// (a writer without room writes them as one skip; see Writer.unstick).
	EventSkip
	// EventEpoch: the topic's home failed over. The sequences belong to the
	// ended epoch's reservation and were not delivered here: most were
	// never handed out; the rest were claimed by a writer that died or was
	// fenced with the old home, or were overwritten by the new epoch's
	// ticks before this reader got to them. The new epoch starts at To+1.
	// One event covers the whole range, however large.
	EventEpoch
	// EventJoin: the sequences were published while a publisher was
	// joining this ring (before it had added the ring to its targets), so
	// they were never written here. ring.Reader never emits it: the
	// subscriber package re-labels the gap or overrun events that a joining
	// publisher explains, and hands them to the handler like any other.
	EventJoin
)

func (k EventKind) String() string {
	switch k {
	case EventGap:
		return "gap"
	case EventOverrun:
		return "overrun"
	case EventCorrupt:
		return "corrupt"
	case EventSkip:
		return "skip"
	case EventEpoch:
		return "epoch"
	case EventJoin:
		return "join"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event reports sequences From..To (inclusive) that will never be delivered.
// Every sequence a reader passes is either delivered once or named by
// exactly one event: no loss is silent.
type Event struct {
	Kind     EventKind
	From, To uint64
}

// Count is how many sequences the event covers.
func (e Event) Count() uint64 { return e.To - e.From + 1 }

func (e Event) String() string { return fmt.Sprintf("%s %d..%d", e.Kind, e.From, e.To) }

// Handler receives what Reader.Poll finds, in sequence order: OnTicks once
// per run of consecutive ticks (never empty), OnEvent between runs. Both run
// on the polling goroutine; views die when OnTicks returns.
type Handler interface {
	OnTicks(ticks []Tick)
	OnEvent(ev Event)
}
