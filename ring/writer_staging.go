package ring

// staging is the writer's staging part: the registered memory a tick is
// copied into before the generic path WRITEs it (layout: stgResult ..
// stgImages, writer.go), and what the current publish staged. Publishing
// goroutine only.
type staging struct {
	pub        uint32 // WriterConfig.PublisherID, stamped on every tick
	maxPayload int
	maxBatch   int
	stg        []byte     // staging memory: result, BUSY, stamps, slot images
	stgAddr    uint64     // stg's address on WriterConfig.Device
	stgSlot    int        // bytes per staging slot image (a multiple of SlotAlign)
	stgN       uint64     // staging slots, a power of two
	stgIdx     uint64     // next staging slot (grows forever; index = stgIdx & (stgN-1))
	stgImages  int        // offset of staging slot 0's image
	lkey       uint32     // staging lkey on WriterConfig.Device
	bulk       bool       // runs of slots may go in one WRITE (device's MaxMsgSize allows it)
	batchOffs  []int      // per staged tick of this publish: its staging slot index
	batchLens  []uint32   // ... the bytes after its stamp
	batchSeqs  []uint64   // ... its sequence
	skipBuf    [8]byte    // a skip slot's payload
	bodies     []slotBody // direct batches: each tick's header after its stamp, built once for every target
}
