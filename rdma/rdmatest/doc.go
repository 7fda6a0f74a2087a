// Package rdmatest is the conformance suite every rdma provider runs with
// one call, so that shm, tcp and verbs behave the same way.
//
// A provider's test file:
//
//	var prov = rdmatest.Provider{
//		Name: rdma.ProviderShm,
//		Open: func() (rdma.Device, error) { return shm.Open(shm.Config{}) },
//	}
//
//	func TestMain(m *testing.M) {
//		rdmatest.RegisterChildRoles(prov) // the suite spawns peer processes
//		child.Main()
//		os.Exit(m.Run())
//	}
//
//	func TestConformance(t *testing.T) { rdmatest.Run(t, prov) }
//
// What it covers (subtests of Run, by group):
//
//   - Device: provider name, caps (remote atomics present), RegisterMemory
//     rejects bad sizes, unknown access bits and memory no peer could reach;
//     fresh memory is zeroed; keys are nonzero, unique and not small
//     counters; Register reaches memory another device of the process
//     allocated; CreateQP rejects bad configs; device Close is idempotent
//     and closes its QPs.
//   - QP: RESET → RTS through Connect (both sides), second Connect refused
//     with ErrQPState and no state change, Close → CLOSED, idempotent, then
//     PostSend/PostRecv fail with ErrClosed and the peer moves to ERR;
//     endpoints round-trip their binary form; an endpoint of another
//     provider is refused with ErrProviderMismatch; PostSend before Connect
//     is refused and completes nothing.
//   - Ops: WRITE from an SGE, inline (the inline buffer is reusable at
//     once) and over loopback, zero-length and 8-byte writes; READ; CAS hit
//     and miss (original value returned); FAA (with wrap-around);
//     WRITE_WITH_IMM completes a posted receive with the immediate and
//     length, after the data landed; SEND/RECV deliver in order with
//     lengths, inline or from an SGE, also over loopback; every opcode over
//     loopback. Exactly the addressed bytes change.
//   - Errors: each bad request completes with its status, leaves the
//     target's (and the local) memory byte-for-byte unchanged and moves the
//     QP to ERR: unknown rkey, past the end, before the start, wrapping
//     address, READ or atomic past the end (StatusRemoteAccess); WRITE to a
//     read-only region, READ from a write-only one, CAS without the atomic
//     right (StatusRemoteAccess); WRITE_WITH_IMM to an unknown rkey;
//     misaligned CAS and FAA (StatusRemoteInvalidRequest); unknown lkey, SGE
//     past its region, READ into memory without local write
//     (StatusLocalProtection); inline over the QP's MaxInline and an unknown
//     opcode (StatusLocalQPOp). Then: every request on an errored QP,
//     signalled or not, completes StatusFlushed, and so do receives; SEND
//     and WRITE_WITH_IMM without a posted receive complete
//     StatusRNRRetryExceeded and write nothing; a SEND longer than the
//     receive buffer: StatusRemoteInvalidRequest at the sender,
//     StatusLocalLength at the receiver, nothing written past the buffer;
//     PostRecv refuses bad buffers and a full receive queue; nil requests
//     are ErrInvalidRequest.
//   - Order: payload WRITE then 8-byte stamp WRITE on one QP, thousands of
//     rounds, with a reader spinning on the stamp (atomic loads) that must
//     never see a stamp before its payload; the writer waits for the reader
//     every 256 rounds, so the reader checks stamps all along the run.
//   - Atomics: FAA and CAS increments racing from four QPs (and, where
//     Caps().Atomic is AtomicGlobal, the owner's CPU atomics): the FAA sum
//     is exact and every CAS increment is won exactly once.
//   - Signal: only signalled requests complete (SignalAll: all, in order);
//     a full send queue is ErrSendQueueFull and does nothing, and polling
//     frees it; unsignalled requests hold their entries until a later
//     completion is polled (verbs semantics).
//   - Regions: regions registered after Connect are reachable at once, on
//     both sides; a deregistered region fails with StatusRemoteAccess, a
//     deregistered local buffer with StatusLocalProtection; many regions,
//     each reached by its own key.
//   - Grants: a QP cannot touch, by any op, a region granted to another QP
//     (named by the rkey that grant returned); a read-only grant refuses
//     writes and atomics; a region registered after a confined QP connected
//     is unreachable until granted, then reachable; a wrong rkey moves both
//     QPs to ERR; bad grants (another device's region, local rights, none,
//     rights the region lacks, a closed region, empty or outside ranges)
//     fail with ErrGrant; a confined QP granted a 64-byte sub-range
//     (GrantRange) reaches it with the granted rights and nothing before,
//     after or across its edges, and holds one range per region; the rkey
//     of another QP's grant of the same region carries none of its rights
//     (a read-only QP cannot write or add through it); the region's own
//     rkey reaches nothing outside a QP's grant, and inside it only where
//     the grant names the region by that rkey (none at all where
//     Caps().GrantOnly); of memory in grant units (rdma.AllocMemory and
//     Register, rdma.RegisterMemory) a range grant works across units,
//     Direct refuses the ungranted units, and a hostile peer
//     (Provider.Hostile, shm: one that keeps and maps every memfd it is
//     sent) holds no file of an ungranted unit, nor a writable one of a
//     read-only grant. Skipped, saying why, on a device without
//     Caps().GrantPerQP.
//   - Close: a QP closed while another goroutine posts to it and its peer's
//     CQ is polled (the poster ends with ErrClosed, the peer goes to ERR);
//     devices closed while posting and polling; a CQ closed while polled;
//     a region closed while a peer writes into it. Nothing crashes or hangs.
//   - Process: FAA/CAS increments racing from several processes and this
//     one (exact sum, each increment once); payload-then-stamp written by
//     another process and checked here; a peer process SIGKILLed: the QP
//     fails a request, moves to ERR and flushes what follows; SEND (inline
//     and from an SGE) and WRITE_WITH_IMM to another process complete its
//     receives with data, length and immediate, and a SEND longer than the
//     receive fails on both sides.
//   - Allocs: PostSend + Poll of WRITE (inline, SGE, 8-byte), READ, CAS and
//     FAA, and unsignalled WRITEs, allocate nothing (testing.AllocsPerRun).
//
// Under -short, the stamp, atomic and process tests run fewer rounds and
// processes. Every wait is bounded (10 s per completion).
package rdmatest
