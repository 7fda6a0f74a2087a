package ring

import (
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

// claimer is the writer's claim part: how it takes sequences on the home's
// counter (publish.go's claimRoom and atomic; direct.go's directAtomic) and
// the completion of each claim. Publishing goroutine only.
type claimer struct {
	homeQP    rdma.QueuePair  // connected to the home's device (loopback on its host): claims, journal WRITEs
	homeQPN   uint32          // homeQP.Num(): tells the home's error completions from a target's
	counter   rdma.RemoteAddr // the home's counter word
	cached    uint64          // the counter as last seen: the next CAS's compare, the next claim's guess
	faa       bool            // ClaimFAA
	wr        rdma.WorkRequest
	claimID   uint64         // bumped by 1<<8 per claim/READ; a late completion of an older one is ignored
	claimDone bool           // the current claim's (or READ's) completion was reaped
	claimOK   bool           // ... with StatusSuccess
	dctr      *uint64        // the mapped home counter (direct.go), or nil: claims through homeQP
	dhome     rdma.DirectMap // dctr's mapping
	hlive     liveness       // dhome's Live, behind its provider's counter (direct.go)
	homeDesc  HomeDesc       // WriterConfig.Home
	soloHome  *Home          // the home whose solo writer this is (solo.go), or nil
	soloOn    bool           // claims come from the run cached..runEnd (solo.go)
	runEnd    uint64         // solo: the run's end, as the counter holds it
	soloNext  *uint64        // solo: the home's solo word (soloState.next), for the lean path (writer_lean.go)
	soloReq   *atomic.Uint32 // solo: soloState.req
	leaseLeft uint64         // lean path: ticks it may still claim before it reads the TSC again (leaseEvery)
	leaseSeen uint64         // lean path: leaseGen when leaseLeft was granted; another value voids it
}

// waiter is how the writer waits: its idle strategy and the deadline of
// the publish under way. Publishing goroutine only.
type waiter struct {
	idle      rdma.IdleStrategy
	timeoutNs int64 // WriterConfig.Timeout
	arbNs     int64 // WriterConfig.ArbitrationWindow, 0: do not wait
	deadline  int64 // monoNs of the current publish's deadline, 0: not started (expired)
}
