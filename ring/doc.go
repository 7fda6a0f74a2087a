// Package ring is the tick ring: one topic, one sequence, written with
// one-sided RDMA operations through the rdma package's queue pairs.
//
// # Regions
//
// A topic has one home (the sequencer region, on the host that owns the
// topic) and every subscriber has its own ring region. Publishers own a
// small credit region for reliable subscribers. All fields little endian;
// sequences start at 1 (0 means "never written") and grow forever; the
// slot of sequence s is s & (slots-1).
//
//	home region (NewHome)                      ring region (NewRing), one per subscriber
//	+0    +--------------------------------+   +0    +--------------------------------+
//	      | magic "TBHM" u32, version u16, |         | magic "TBRG" u32, version u16, |
//	      | mode u8=0, pad u8,             |         | mode u8 (1 lossy, 2 reliable), |
//	      | journal slots u32, slot size   |         | pad u8, slots u32, slot size   |
//	      | u32, epoch u64, start u64,     |         | u32, epoch u64, start u64,     |
//	      | pad to 128                     |         | pad to 128                     |
//	+128  +--------------------------------+   +128  +--------------------------------+
//	      | counter u64: next sequence to  |         | head u64: next sequence the    |
//	      | claim; CAS/FAA through QPs only|         | reader delivers (observers)    |
//	      | solo u64: a solo writer's next |         | pad to 128                     |
//	      | (0: none; solo.go), pad to 128 |         |                                |
//	+256  +--------------------------------+   +256  +--------------------------------+
//	      | unused to 64 KiB (the counter's|         | slot[0 .. N-1]                 |
//	      | grant unit ends here)          |         +--------------------------------+
//	+64Ki +--------------------------------+
//	      | journal slot[0 .. J-1]         |
//	      +--------------------------------+
//
//	slot (slot size bytes, a multiple of 32)     credit region (a writer's), one cell per
//	+0   stamp      u64  == seq, written LAST     reliable target, CreditCellSize each,
//	+8   publish ns i64                           creditStride (a page) apart:
//	+16  len        u32  payload bytes           +0   next u64: the subscriber delivered
//	+20  type       u16  application's                 every sequence below next
//	+22  flags      u16  FlagSkip | user bits          (written by its reader via RDMA)
//	+24  publisher  u32                          +8   pad to 128, page unused
//	+28  check      u32  headerCheck(seq, fields, payload)
//	+32  payload    len bytes
//
// layout.go holds the structs behind these drawings, with compile-time size
// checks both ways round.
//
// A slot size is a multiple of 32 (SlotAlign, Aeron's frame alignment),
// so a 64-byte message takes 96 bytes, one and a half cache lines, and
// a slot starts either on a line or half way into one:
//
//	96-byte slots (k even; the slots start on a line):
//	|<---------- line m ------------>|<--------- line m+1 ----------->|<---- line m+2 ---->|
//	| k: header 32   | k: payload    | k: payload     | k+1: header 32 | k+1: payload 0..63 |
//	| (stamp first)  | 0..31         | 32..63         | (stamp first)  |                    |
//
// The 8-byte stamp, the seqlock word, is always 8-aligned (32-aligned).
// Layout version 3 (layoutVersion, DescVersion): the check covers the
// payload as well as the header (a lossy slot's seqlock holds against one
// writer, the check against a second one's older lap landing under it:
// slot.go). Version 2's check covered the header alone, version 1 had
// slots a multiple of 64; their descriptors are refused.
//
// # Publishing
//
// A Writer claims sequences on the home counter with a CAS from its cached
// value (ClaimCAS: a lone publisher wins first time) or a fetch-and-add
// (ClaimFAA: cheaper with several free-running publishers), one or n at a
// time (PublishBatch). It stages each tick in its own registered memory and
// WRITEs it into the journal and then into every target ring, each through
// the target's QP:
//
//	reliable: WRITE body (bytes 8..), WRITE stamp
//	lossy:    WRITE stamp=StampBusy, WRITE body, WRITE stamp   (a seqlock)
//
// A batch's run of consecutive slots goes in one body WRITE whose staged
// stamps are StampBusy, then one stamp WRITE per slot (k+1 WRITEs for k
// ticks; lossy 2k+1). Writes on one QP are placed in order, so a stamp is
// never visible before its body, on shm (CPU copies, the 8-byte stamp one
// atomic store) as on a NIC. Every update of the counter goes through a QP, the home owner's own
// publisher included (a loopback QP), so a NIC whose atomics are atomic only
// among themselves stays correct. Only one WRITE in SignalEvery per QP is
// signalled; completions are reaped by polling. A target whose QP fails is
// dropped, reported (OnTargetDropped, Stats) and publishing goes on.
// Targets come and go at run time (AddTarget, RemoveTarget: copy-on-write
// lists behind an atomic pointer); the hot path takes no lock.
//
// On shm the writer takes a direct path (direct.go; WriterConfig.Generic
// turns it off): the queue pairs hand it their peers' mapped memory
// (rdma.DirectMapper, after the same rkey, bounds, rights and grant checks
// as a post), so a claim is one CPU CAS/FAA on the mapped counter (shm is
// AtomicGlobal: its QP atomics are CPU atomics on that same word) and a
// write is (StampBusy,) header and payload copied straight from the
// caller's bytes, then a release store of the stamp: no work request, no
// completion, no staging copy. The fencing (SetLimit, FenceCounter) is the
// same code. A target whose QP leaves RTS or whose ring is withdrawn is
// dropped at its next publish, as on an error completion. A reliable
// target's head word is mapped too: a ring that looks full costs a load.
//
// A home's lone writer in the home's own process (WriterConfig.SoloHome)
// goes further (solo.go, go-disruptor's single-producer sequencer): it
// reserves runs of sequences with one CAS each and hands them out with
// plain stores, publishing its next sequence in the home region's solo
// word, which readers READ before the counter. Home.Share ends it for
// good before the home grants its counter to anyone else: a membarrier
// handshake stops the writer between claims and the run's unused tail goes
// back, so no sequence is doubled or left a hole. Its Publish and
// PublishBatch take the lean path (writer_lean.go: Aeron's tryClaim on an
// exclusive publication) while every ring is mapped: the claim's plain
// stores, the lease (a TSC read per 16 ticks) and limit checks, then per
// ring (a single tick's journal last, a batch's first) a liveness check,
// the payload (from its byte 32 on, then its first 32 bytes), the header
// (three word stores, built once) and the stamp, all copied straight from
// the caller's bytes: the stamp's line is the last one touched, whether the slot starts on a line
// or half way into one (direct.go, slotOrder). A single tick also asks
// for each target ring's slot eight ticks on (PREFETCHW, prefetchAhead),
// where no reader can still need it, so the lines a reader's core holds
// are on their way before the stores reach them.
//
// PublishAt(seq) is A/B line arbitration: a CAS seq→seq+1 that only the
// first line wins; the other gets ErrLost and writes nothing.
//
// Flush waits until everything posted has completed (one signalled READ per
// QP); call it before Close when the last ticks matter.
//
// # Receiving
//
// The ring's Reader spins (through the caller's IdleStrategy) on
// slot[next].stamp:
//
//   - == next: deliver, advance. Lossy rings copy the slot out and deliver
//     the copy only if the stamp is unchanged afterwards, so a torn tick is
//     never delivered; reliable rings hand out zero-copy views, because no
//     writer touches a slot the reader has not released.
//   - > next, in the same slot: lapped (lossy). The journal is asked for
//     what it still holds (three RDMA READs per sequence: stamp, slot,
//     stamp); the rest is one EventOverrun; the reader resumes at
//     stamp-slots+1, the oldest sequence the ring may still hold
//     (adjacent events of one kind within a poll are merged, so a reader
//     lapped again while it catches up reports one range).
//   - otherwise: not written yet. If later sequences are present and stay
//     so for GapTimeout while next is still missing, its claimant died
//     between claim and write: journal, else EventGap for exactly the
//     missing run. With nothing later in the ring, a reader given the
//     journal (SetJournal) READs the home's counter to learn that next was
//     claimed, so a claimant that died on the last tick of a burst is
//     reported too.
//
// A slot whose header fails its check (length past the slot, checksum) is
// EventCorrupt. A stamp ahead of the reader is acted on only if the slot's
// header check passes for it and it is below the newest reservation the
// reader knows (SetEpoch), so a stray 8-byte WRITE cannot make it jump.
// Holes below a sequence that was already written a gap timeout ago are
// reported at once, not one gap timeout each.
//
// # Epochs and fencing
//
// Each home's term is an epoch with its own range of sequences (epoch.go):
// a writer refuses to write a claim at or above its limit (SetLimit: the
// home's reservation, 0 once the epoch ended; ErrFenced, retryable), and a
// reader told of a new epoch (SetEpoch) reports the old epoch's unused
// range as one EventEpoch and goes on at the new start. Every sequence the reader passes is delivered once or named
// by exactly one event; ReaderStats add up to Next-Start.
//
// SetJournal may be called while polling: the poller adopts the journal at
// its next Poll (a failover brings a new home's journal).
//
// # Reliable mode and credits
//
// The publisher must be told the subscriber's RingDesc (AddTarget). For a
// reliable ring AddTarget returns a CreditDesc naming a credit cell in the
// writer's memory, initialised to the ring's Start; the subscriber must be
// told it and call Reader.AddCredit with a QP to the writer's device. The
// reader then WRITEs its position into the cell (8 inline bytes) whenever
// it moved slots/16 sequences since the last WRITE, and when it goes idle.
// A writer's room is the minimum over its reliable targets of
// position+slots, cached and re-read only when the ring looks full; it waits
// through its IdleStrategy and fails with ErrBackPressure after Timeout.
// When a ring looks full by its cell, the writer also READs the ring's head
// (line 1 of the ring region, stored by the reader after every advancing
// poll): a subscriber that never attached the cell still gets flow control,
// at one READ per look instead of none. Each cell is a page and a grant
// unit of its own (rdma.MemoryConfig), and each subscriber's credit QP is
// granted its own cell only (Writer.GrantCredit): on shm it is handed that
// page's memfd and no other.
//
// # Descriptors
//
// HomeDesc, RingDesc and CreditDesc are versioned binary
// (MarshalBinary/UnmarshalBinary); decoders check every length and range and
// leave the value unchanged on error. They travel between processes by
// whatever the caller uses (the bus; files or arguments in tests).
//
// # Concurrency
//
// One goroutine publishes per Writer and one polls per Reader. AddTarget,
// RemoveTarget, AddCredit, RemoveCredit and Stats are safe from others.
package ring
