package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/tickbus/tickbus/rdma"
)

// reap reads the responses to this QP's requests and completes them in
// order. Any read error, malformed or unexpected response, or NAK ends it and
// moves the QP to ERR.
func (q *QP) reap(c *rawConn) {
	defer q.workers.Done()
	defer close(q.reapDone)
	defer c.release()
	br := bufio.NewReaderSize(c, 64<<10)
	var hdr [respHeaderLen]byte
	var err error
	for {
		if _, err = io.ReadFull(br, hdr[:]); err != nil {
			break
		}
		var r response
		if r, err = decodeResponse(hdr[:], q.maxMsg); err != nil {
			break
		}
		q.cmu.Lock()
		err = q.onResponse(br, r)
		q.giveUnused()
		q.cmu.Unlock()
		if err != nil {
			break
		}
	}
	switch {
	case errors.Is(err, errNak), errors.Is(err, errLocal), errors.Is(err, ErrFrame):
		q.fail(rdma.StatusFlushed, err)
	default: // the connection broke: the peer or the path died
		q.fail(rdma.StatusRetryExceeded, err)
	}
}

// ackable reports whether a request of op is answered by a plain ACK.
func ackable(op rdma.Opcode) bool {
	return op == rdma.OpWrite || op == rdma.OpWriteImm || op == rdma.OpSend
}

// onResponse completes the requests r answers. Called with cmu held.
func (q *QP) onResponse(br *bufio.Reader, r response) error {
	// The requests before the one answered, and it too for an ACK, are
	// WRITEs and SENDs that succeeded: most of them unsignalled, which
	// complete silently, so consumed is stored once per run of them (and
	// before any completion is pushed), not per request.
	pos, posted := q.consumed.Load(), atomic.LoadUint64(&q.posted)
	for {
		if pos == posted {
			if posted = atomic.LoadUint64(&q.posted); pos == posted { // pairs with postSend's Store
				q.consumed.Store(pos)
				return fmt.Errorf("%w: response for seq %d, none outstanding", ErrFrame, r.seq)
			}
		}
		seq := pos + 1
		e := &q.sq[pos&q.sqMask]
		if seq > r.seq {
			q.consumed.Store(pos)
			return fmt.Errorf("%w: response for seq %d, next outstanding is %d", ErrFrame, r.seq, seq)
		}
		if seq < r.seq || r.kind == respAck {
			if !ackable(e.op) {
				q.consumed.Store(pos)
				return fmt.Errorf("%w: seq %d (%s) acknowledged without its result", ErrFrame, seq, e.op)
			}
			if e.signaled {
				q.complete(e, pos, rdma.StatusSuccess) // stores consumed = pos+1 before the push
			} else {
				q.unused++ // giveUnused returns its credit; an ackable request is never due
			}
			pos++
			if seq == r.seq {
				q.consumed.Store(pos) // the watchdog and Close Load it
				return nil
			}
			continue
		}
		q.consumed.Store(pos)
		switch r.kind {
		case respNak:
			q.markError()
			q.complete(e, pos, r.status)
			return fmt.Errorf("%w: seq %d (%s): %s", errNak, seq, e.op, r.status)
		case respRead:
			if e.op != rdma.OpRead || r.len != e.len {
				return fmt.Errorf("%w: READ response of %d bytes for seq %d (%s of %d)", ErrFrame, r.len, seq, e.op, e.len)
			}
			d := q.sqDst[pos&q.sqMask]
			reg, dst, lst := q.localSpan(rdma.SGE{Addr: d.laddr, LKey: d.lkey, Len: e.len}, rdma.AccessLocalWrite, e.len)
			if lst != rdma.StatusSuccess { // the destination went away after the post
				if _, err := br.Discard(int(r.len)); err != nil {
					return err
				}
				q.markError()
				q.complete(e, pos, lst)
				return errLocal
			}
			err := readInto(br, dst)
			reg.release()
			if err != nil {
				return err
			}
			q.complete(e, pos, rdma.StatusSuccess)
		case respAtomic:
			if !e.op.IsAtomic() {
				return fmt.Errorf("%w: atomic response for seq %d (%s)", ErrFrame, seq, e.op)
			}
			d := q.sqDst[pos&q.sqMask]
			reg, dst, lst := q.localSpan(rdma.SGE{Addr: d.laddr, LKey: d.lkey, Len: 8}, rdma.AccessLocalWrite, 8)
			if lst != rdma.StatusSuccess {
				q.markError()
				q.complete(e, pos, lst)
				return errLocal
			}
			var v [8]byte
			binary.NativeEndian.PutUint64(v[:], r.value)
			putBytes(dst, v[:])
			reg.release()
			q.complete(e, pos, rdma.StatusSuccess)
		}
		return nil
	}
}

// readInto fills dst from br; an aligned 8-byte destination is stored
// atomically.
func readInto(br *bufio.Reader, dst []byte) error {
	if len(dst) == 8 && aligned8(dst) {
		var v [8]byte
		if _, err := io.ReadFull(br, v[:]); err != nil {
			return err
		}
		atomic.StoreUint64(word(dst), binary.NativeEndian.Uint64(v[:]))
		return nil
	}
	_, err := io.ReadFull(br, dst)
	return err
}
