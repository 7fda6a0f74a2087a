package rdma

import "fmt"

// Opcode is the operation of a work request or of a completion.
type Opcode uint8

const (
	// OpWrite copies the local buffer into remote memory. The target is not
	// told.
	OpWrite Opcode = iota + 1
	// OpWriteImm is OpWrite whose arrival consumes a posted receive at the
	// target and completes it with the immediate value (OpRecvImm).
	OpWriteImm
	// OpRead copies remote memory into the local buffer.
	OpRead
	// OpCompareAndSwap compares the remote aligned u64 with Compare and, if
	// equal, stores Swap. The original value lands in the local 8-byte buffer.
	OpCompareAndSwap
	// OpFetchAndAdd adds Add to the remote aligned u64. The original value
	// lands in the local 8-byte buffer.
	OpFetchAndAdd
	// OpSend delivers the local buffer into the next receive the peer posted.
	OpSend
	// OpRecv is the completion of a posted receive filled by a SEND.
	OpRecv
	// OpRecvImm is the completion of a posted receive consumed by a
	// WRITE_WITH_IMM; Completion.Imm holds the immediate value.
	OpRecvImm
)

var opcodeNames = [...]string{
	OpWrite:          "WRITE",
	OpWriteImm:       "WRITE_WITH_IMM",
	OpRead:           "READ",
	OpCompareAndSwap: "COMPARE_AND_SWAP",
	OpFetchAndAdd:    "FETCH_AND_ADD",
	OpSend:           "SEND",
	OpRecv:           "RECV",
	OpRecvImm:        "RECV_RDMA_WITH_IMM",
}

func (o Opcode) String() string {
	if int(o) < len(opcodeNames) && opcodeNames[o] != "" {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsAtomic reports whether o is a remote atomic.
func (o Opcode) IsAtomic() bool { return o == OpCompareAndSwap || o == OpFetchAndAdd }

// Status is a completion's outcome, modelled on enum ibv_wc_status.
type Status uint8

const (
	// StatusSuccess: the operation completed.
	StatusSuccess Status = iota
	// StatusLocalLength: the local buffer is too small for the operation or
	// for the incoming SEND (IBV_WC_LOC_LEN_ERR).
	StatusLocalLength
	// StatusLocalQPOp: the request is invalid for this QP, such as an
	// unknown opcode or an inline payload over the QP's limit
	// (IBV_WC_LOC_QP_OP_ERR).
	StatusLocalQPOp
	// StatusLocalProtection: the local SGE names an unknown lkey, lies out of
	// its region, or needs local write the region does not grant
	// (IBV_WC_LOC_PROT_ERR).
	StatusLocalProtection
	// StatusFlushed: the QP was in the error state or closed, so the request
	// never ran (IBV_WC_WR_FLUSH_ERR).
	StatusFlushed
	// StatusRemoteInvalidRequest: the target refused the request itself, such
	// as a misaligned atomic or a length over the message limit
	// (IBV_WC_REM_INV_REQ_ERR).
	StatusRemoteInvalidRequest
	// StatusRemoteAccess: unknown rkey, out of bounds, or a right the region
	// does not grant (IBV_WC_REM_ACCESS_ERR).
	StatusRemoteAccess
	// StatusRemoteOp: the target failed to carry out a valid request
	// (IBV_WC_REM_OP_ERR).
	StatusRemoteOp
	// StatusRetryExceeded: the peer stopped answering (IBV_WC_RETRY_EXC_ERR).
	StatusRetryExceeded
	// StatusRNRRetryExceeded: the peer had no receive posted
	// (IBV_WC_RNR_RETRY_EXC_ERR).
	StatusRNRRetryExceeded
	// StatusFatal: the provider failed (IBV_WC_FATAL_ERR).
	StatusFatal
)

var statusNames = [...]string{
	StatusSuccess:              "success",
	StatusLocalLength:          "local length error",
	StatusLocalQPOp:            "local QP operation error",
	StatusLocalProtection:      "local protection error",
	StatusFlushed:              "work request flushed",
	StatusRemoteInvalidRequest: "remote invalid request",
	StatusRemoteAccess:         "remote access error",
	StatusRemoteOp:             "remote operation error",
	StatusRetryExceeded:        "transport retry counter exceeded",
	StatusRNRRetryExceeded:     "RNR retry counter exceeded",
	StatusFatal:                "fatal error",
}

func (s Status) String() string {
	if int(s) < len(statusNames) && statusNames[s] != "" {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Err returns nil for StatusSuccess and otherwise an error that wraps
// ErrCompletion, for control paths that want an error value. It allocates;
// hot paths compare the Status directly.
func (s Status) Err() error {
	if s == StatusSuccess {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrCompletion, s)
}

// SendFlags modify a work request, as ibv_send_flags.
type SendFlags uint8

const (
	// FlagSignaled asks for a completion on success. Errors always complete.
	FlagSignaled SendFlags = 1 << iota
	// FlagInline takes the payload from WorkRequest.Inline at post time; the
	// buffer need not be registered and may be reused as soon as PostSend
	// returns.
	FlagInline
	// FlagFence waits for earlier READs and atomics on the QP to complete
	// before this request runs.
	FlagFence
)
