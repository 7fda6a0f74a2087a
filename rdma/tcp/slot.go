package tcp

import (
	"encoding/binary"
	"fmt"

	"github.com/tickbus/tickbus/internal/release"
	"github.com/tickbus/tickbus/rdma"
)

// PostSlot posts the WRITEs a ring writer makes into one slot of a remote
// ring, all to region rkey, as one WRITE list: (busy:) an 8-byte WRITE of
// busyWord at dst, a WRITE of body at dst+8, then an 8-byte WRITE of stamp
// at dst. On the wire and in the completions it is what PostSendBatch of
// those three (two) work requests makes, each WRITE a request of its own,
// each with id; only the stamp's may be signalled (signaled). The bytes
// are copied into the send buffer before it returns. What it saves is the
// work requests' way there: no source region to look up and pin (the
// bytes are the caller's, as an inline WRITE's), no chain to scan for
// runs, one check of the room for the whole slot.
//
// It declines, with an error and nothing queued, whatever does not go the
// short way: a QP not ready to send (rdma.ErrQPState), a send queue,
// completion queue or send buffer without room for all of it, or a frame
// that would wrap the send buffer or pass a list's limits
// (rdma.ErrSendQueueFull). The caller then posts the same WRITEs as work
// requests, which meet each of those as PostSendBatch does (a local
// error, the ERR state, a wait for room).
//
// Like PostSend it never blocks, allocates nothing and makes no system
// call.
func (q *QP) PostSlot(rkey uint32, dst uint64, body []byte, stamp, busyWord uint64, busy bool, id uint64, signaled bool) error {
	spinAcquire(&q.postBusy)
	err := q.postSlot(rkey, dst, body, stamp, busyWord, busy, id, signaled)
	postDone(&q.postBusy)
	return err
}

// errSlotState: PostSlot finds the QP not ready to send (or a list open,
// which no caller leaves between posts); the work requests' way says why.
var errSlotState = fmt.Errorf("%w: PostSlot: not ready to send", rdma.ErrQPState)

func (q *QP) postSlot(rkey uint32, dst uint64, body []byte, stamp, busyWord uint64, busy bool, id uint64, signaled bool) error {
	if rdma.QPState(q.state.Load()) != rdma.QPReadyToSend || q.list.open {
		return errSlotState
	}
	q.rewind()
	k := uint64(2)
	if busy {
		k = 3
	}
	pos := q.npos
	if pos-q.retired.Load()+k > q.sqDepth { // pairs with the reaper's Store
		return rdma.ErrSendQueueFull
	}
	n := uint64(len(body))
	bytes := k*listElemLen + n + 8*(k-1)
	if n > uint64(q.maxMsg) || bytes > uint64(min(listMaxBytes, q.maxMsg)) {
		return rdma.ErrSendQueueFull
	}
	t := q.tx
	need := reqHeaderLen + bytes
	i := t.w & t.mask
	if i+need > uint64(len(t.buf)) || t.room(need) < need {
		return rdma.ErrSendQueueFull
	}
	if q.credits < int(k) {
		q.credits += q.scq.take(int(k) - q.credits + q.scq.stash) // one atomic for the slot and the next few
		if q.credits < int(k) {
			q.trimCredits()
			return rdma.ErrSendQueueFull
		}
	}
	q.credits -= int(k)
	b := t.buf[i : i+need : i+need]
	h := request{op: opWriteList, seq: pos + 1, rkey: rkey, len: uint32(bytes), imm: uint32(k)}
	h.put(b)
	b = b[reqHeaderLen:]
	all := q.cfg.SignalAll
	if busy {
		b = q.slotWord(b, pos, dst, busyWord, id, all)
		pos++
	}
	el := listElem{raddr: dst + 8, len: uint32(n), flags: q.ackFlags(pos, all)}
	el.put(b)
	copy(b[listElemLen:], body)
	b = b[listElemLen+n:]
	q.sq[pos&q.sqMask] = sqEntry{id: id, op: rdma.OpWrite, len: uint32(n), signaled: all}
	pos++
	q.slotWord(b, pos, dst, stamp, id, all || signaled)
	pos++
	t.w += need
	q.npos = pos
	release.Store64(&q.posted, pos) // pairs with the Loads in reap and drain; publish's XCHG follows
	q.trimCredits()
	q.publish()
	return nil
}

// slotWord puts an 8-byte WRITE of v at dst, request pos, into b and its
// send queue entry; it returns the rest of b.
func (q *QP) slotWord(b []byte, pos, dst, v, id uint64, signaled bool) []byte {
	el := listElem{raddr: dst, len: 8, flags: q.ackFlags(pos, signaled)}
	el.put(b)
	binary.LittleEndian.PutUint64(b[listElemLen:], v)
	q.sq[pos&q.sqMask] = sqEntry{id: id, op: rdma.OpWrite, len: 8, signaled: signaled}
	return b[listElemLen+8:]
}
