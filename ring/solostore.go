package ring

import "github.com/tickbus/tickbus/internal/membarrier"

// soloStore stores the solo word (solo.go): a plain MOV on amd64
// (membarrier.StoreRelease), kept in order with the atomic load that
// follows it in soloClaim. The Dekker half of the handshake is
// membarrier's, on Share's side.
func soloStore(p *uint64, v uint64) { membarrier.StoreRelease(p, v) }

// stampStore stores a mapped slot's stamp (direct.go): a release store
// (membarrier.StoreRelease; the reader in the other process sees every
// earlier store of the slot first). The slot's copy between the StampBusy
// and the final stamp keeps the first from being taken for a dead store:
// loads of the payload (putHead's and putTail's, inlined), a
// runtime.memmove call for other lengths, and the branches between them
// (Go's dead-store pass works within one block and stops at a load).
// go tool objdump shows the MOVQ $-1 of StampBusy in leanTick, putSlot
// and putRun.
func stampStore(p *uint64, v uint64) { membarrier.StoreRelease(p, v) }
