package rdma

// SGE is one scatter/gather element: a local buffer inside a MemoryRegion
// registered on the same device, named by its lkey.
type SGE struct {
	Addr uint64 // local virtual address of the first byte
	Len  uint32 // bytes
	LKey uint32 // the region's lkey
}

// WorkRequest is one send-queue request. Keep them preallocated: PostSend
// takes a pointer and keeps nothing after it returns.
//
//	op                 | Local                        | Remote    | other
//	-------------------+------------------------------+-----------+----------------
//	OpWrite            | source (or Inline)           | dest      |
//	OpWriteImm         | source (or Inline)           | dest      | Imm
//	OpRead             | destination (local write)    | source    |
//	OpCompareAndSwap   | 8 bytes for the original     | aligned 8 | Compare, Swap
//	OpFetchAndAdd      | 8 bytes for the original     | aligned 8 | Add
//	OpSend             | source (or Inline)           | -         | Imm (optional)
type WorkRequest struct {
	ID     uint64    // echoed in the completion
	Op     Opcode    // what to do
	Flags  SendFlags // FlagSignaled, FlagInline, FlagFence
	Local  SGE       // local buffer; unused when FlagInline is set
	Inline []byte    // payload with FlagInline; copied before PostSend returns
	Remote RemoteAddr
	Imm    uint32 // immediate value for OpWriteImm
	// Compare is the expected value of OpCompareAndSwap.
	Compare uint64
	// Swap is the value OpCompareAndSwap stores when the compare matches.
	Swap uint64
	// Add is the addend of OpFetchAndAdd.
	Add uint64
}

// RemoteAddr names remote memory for one operation.
type RemoteAddr struct {
	Addr uint64 // remote virtual address
	RKey uint32 // the remote region's rkey
}

// RecvRequest is one receive-queue request: a buffer for an incoming SEND,
// or a placeholder consumed by an incoming WRITE_WITH_IMM.
type RecvRequest struct {
	ID    uint64
	Local SGE // needs AccessLocalWrite; may be empty for WRITE_WITH_IMM only
}

// Completion is one entry of a completion queue, as struct ibv_wc.
type Completion struct {
	ID     uint64 // the work request's ID
	Status Status
	Op     Opcode
	QPN    uint32 // the local QP the request belonged to
	Bytes  uint32 // bytes transferred (READ, RECV)
	Imm    uint32 // immediate value of OpRecvImm or of a SEND that carried one
}
