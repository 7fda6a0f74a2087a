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

// serve is the responder of one incoming data connection: it reads the
// peer's requests in order, checks each against this device's regions,
// applies it and answers. Acknowledgements of WRITEs and SENDs are
// cumulative and batched (frame.go, reqSignaled): written when the buffered
// input runs out and a signalled one is owed, after ackEvery, or when no
// input came for ackDelay. Garbage, a truncated frame or a
// broken connection ends it and moves the QP to ERR; the memory of this
// device is only touched by whole, valid frames.
func (q *QP) serve(c *rawConn) {
	defer c.release()
	br := bufio.NewReaderSize(c, 256<<10)
	bw := bufio.NewWriterSize(c, 64<<10)
	s := responder{q: q, bw: bw, max: uint32(q.dev.cfg.MaxMsgSize)}
	// When no input came for ackDelay, answer everything applied: the
	// requester's unsignalled tail, which nobody polls for, but which its
	// watchdog and its Close wait on. A write error here shows as the
	// connection's next read error.
	c.owed = func() bool { return s.ackUpto != 0 }
	c.answer = func() {
		if s.flushAck() == nil {
			_ = bw.Flush()
		}
	}
	var hdr [reqHeaderLen]byte
	var err error
	expect := uint64(1)
	for {
		// Answer when the buffered input runs out and an answer is wanted
		// (a prompt request's ACK, a reqAckNow request's, a READ or atomic
		// response, a NAK), and after a reqAckNow request once ackNowBytes
		// of input came since the last answer whether or not it runs out:
		// a requester streaming into a full pipe would otherwise hear
		// nothing until it stops, its send queue filling and draining in
		// lock step with the round trip.
		if s.answerDue(br.Buffered(), bw.Buffered()) {
			if err = s.flushAck(); err != nil {
				break
			}
			if err = bw.Flush(); err != nil {
				break
			}
		}
		if _, err = io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: truncated request header: %w", ErrFrame, err)
			}
			break
		}
		var r request
		if r, err = decodeRequest(hdr[:], s.max); err != nil {
			break
		}
		s.since += reqHeaderLen
		if hasPayload(r.op) || r.op == opWriteList {
			s.since += int(r.len)
		}
		if r.seq != expect {
			err = fmt.Errorf("%w: request seq %d, want %d", ErrFrame, r.seq, expect)
			break
		}
		expect++
		if r.op == opWriteList {
			var list []byte
			if list, err = br.Peek(int(r.len)); err != nil { // r.len <= listMaxBytes < br.Size()
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("%w: truncated WRITE list: %w", ErrFrame, err)
				}
				break
			}
			expect += uint64(r.imm) - 1
			err = s.applyList(&r, list)
			_, _ = br.Discard(len(list)) // buffered: cannot fail
			if err != nil {
				break
			}
			continue
		}
		var payload []byte
		peeked := 0
		if hasPayload(r.op) {
			if int(r.len) <= br.Size() {
				// One copy: applied straight from the read buffer, which
				// it stays in until Discard.
				payload, err = br.Peek(int(r.len))
				peeked = len(payload)
			} else {
				if cap(s.scratch) < int(r.len) {
					s.scratch = make([]byte, r.len)
				}
				payload = s.scratch[:r.len]
				_, err = io.ReadFull(br, payload)
			}
			if err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
					err = fmt.Errorf("%w: truncated %s payload: %w", ErrFrame, r.op, err)
				}
				break
			}
		}
		err = s.apply(&r, payload)
		if peeked > 0 {
			_, _ = br.Discard(peeked) // buffered: cannot fail
		}
		if err != nil {
			break
		}
	}
	switch {
	case errors.Is(err, ErrRemoteAccess): // counted by refuse
		q.endRefused(c, br, err)
	case errors.Is(err, ErrFrame):
		q.log.Warn().Err(err).Str("peer", c.remoteAddr()).Msg("garbage on data connection; closing it")
		q.fail(rdma.StatusFlushed, err)
	default:
		q.fail(rdma.StatusRetryExceeded, fmt.Errorf("tcp: incoming connection: %w", err))
	}
	c.shutdown()
}

// responder is serve's state.
type responder struct {
	q       *QP
	bw      *bufio.Writer
	max     uint32
	scratch []byte
	ackUpto uint64 // highest applied seq whose ACK is owed; 0 for none
	wanted  bool   // a reqSignaled request is among them: answer once the input runs out
	now     bool   // a reqAckNow request is among them: answer soon (ackNowBytes)
	since   int    // input bytes read since the last answer
	out     [respHeaderLen]byte
}

// answerDue reports whether serve answers now, with buffered bytes of
// input still unread and pending bytes of answers unwritten (see serve).
func (s *responder) answerDue(buffered, pending int) bool {
	return (buffered == 0 && (s.wanted || s.now || pending > 0)) || (s.now && s.since >= ackNowBytes)
}

func (s *responder) flushAck() error {
	if s.ackUpto == 0 {
		return nil
	}
	return s.respond(response{kind: respAck, seq: s.ackUpto}, nil)
}

// respond writes a response; it answers every earlier request too.
func (s *responder) respond(r response, data []byte) error {
	r.put(s.out[:])
	s.ackUpto, s.wanted, s.now, s.since = 0, false, false, 0
	if _, err := s.bw.Write(s.out[:]); err != nil {
		return err
	}
	if len(data) > 0 {
		if len(data) == 8 && aligned8(data) {
			var v [8]byte
			binary.NativeEndian.PutUint64(v[:], atomic.LoadUint64(word(data))) // pairs with atomic stores in putBytes and by the owner
			_, err := s.bw.Write(v[:])
			return err
		}
		_, err := s.bw.Write(data)
		return err
	}
	return nil
}

func (s *responder) nak(seq uint64, st rdma.Status) error {
	return s.respond(response{kind: respNak, status: st, seq: seq}, nil)
}

// remoteSpan finds and pins n bytes at addr of the region named by rkey,
// checking the access need.
func (s *responder) remoteSpan(rkey uint32, addr, n uint64, need rdma.Access) (*region, []byte, rdma.Status) {
	r := s.q.dev.keys.Load().byR[rkey]
	if r == nil || !r.access.Has(need) || !s.q.allowed(rkey, need, addr, n) || !r.acquire() {
		return nil, nil, rdma.StatusRemoteAccess
	}
	b, ok := r.span(addr, n)
	if !ok {
		r.release()
		return nil, nil, rdma.StatusRemoteAccess
	}
	return r, b, rdma.StatusSuccess
}

// takeRecv consumes the oldest posted receive.
func (s *responder) takeRecv() (rdma.RecvRequest, bool) {
	q := s.q
	q.rmu.Lock()
	defer q.rmu.Unlock()
	pos := q.rqConsumed.Load()
	if pos == q.rqPosted.Load() { // pairs with PostRecv's Store
		return rdma.RecvRequest{}, false
	}
	rr := q.rq[pos&q.rqMask]
	q.rqConsumed.Store(pos + 1) // pairs with PostRecv's full check
	return rr, true
}

// applyList applies the WRITEs of a WRITE list (frame.go) with header h,
// once the whole list is known to be well formed, each as if it had come
// in a frame of its own. The checks of apply's WRITE (remoteSpan) are made
// once for the list: the region and the grant looked up, the region
// pinned, and the hull of the list's WRITEs bounds- and grant-checked; a
// WRITE inside the hull is inside both. Only a list whose hull fails is
// checked WRITE by WRITE (applyEach), so the first WRITE out of bounds is
// refused with those before it applied, as separate WRITEs would be.
func (s *responder) applyList(h *request, list []byte) error {
	sp, err := scanList(list, h.imm)
	if err != nil {
		return err
	}
	q := s.q
	reg := q.dev.keys.Load().byR[h.rkey]
	ok := reg != nil && reg.access.Has(rdma.AccessRemoteWrite)
	var g grantSpan
	confined := false
	if t := q.grants.Load(); t != nil { // pairs with Grant's Store
		var granted bool
		g, granted = (*t)[h.rkey]
		confined, ok = true, ok && granted && g.access.Has(rdma.AccessRemoteWrite)
	}
	if !ok || !reg.acquire() {
		return s.refuse(&request{op: rdma.OpWrite, seq: h.seq, rkey: h.rkey, raddr: binary.LittleEndian.Uint64(list), len: binary.LittleEndian.Uint32(list[8:])}, rdma.StatusRemoteAccess)
	}
	n := sp.hi - sp.lo
	in := !sp.wraps && (!confined || sp.lo >= g.lo && n <= g.hi-g.lo && sp.lo-g.lo <= g.hi-g.lo-n)
	if in {
		_, in = reg.span(sp.lo, n)
	}
	if !in {
		err := s.applyEach(h, list, reg, g, confined)
		reg.release()
		return err
	}
	// Every WRITE is in the region and the grant: [raddr, raddr+len) lies
	// in the hull. The list is well formed (scanList): entries are read
	// without checks.
	b, base := reg.b, reg.addr
	for len(list) > 0 {
		raddr := binary.LittleEndian.Uint64(list) - base
		if list[13] == elemRun {
			stride := uint64(binary.LittleEndian.Uint32(list[8:]))
			p := list[listElemLen : listElemLen+8*int(binary.LittleEndian.Uint16(list[14:]))]
			for ; len(p) >= 8; p = p[8:] {
				putBytes(b[raddr:raddr+8:raddr+8], p[:8])
				raddr += stride
			}
			list = list[listElemLen+8*int(binary.LittleEndian.Uint16(list[14:])):]
			continue
		}
		ln := uint64(binary.LittleEndian.Uint32(list[8:]))
		putBytes(b[raddr:raddr+ln:raddr+ln], list[listElemLen:listElemLen+ln])
		list = list[listElemLen+ln:]
	}
	reg.release()
	s.ackUpto = h.seq + uint64(h.imm) - 1
	s.wanted = s.wanted || sp.flags&reqSignaled != 0
	s.now = s.now || sp.flags&reqAckNow != 0
	return nil
}

// applyEach is applyList for a list whose hull failed a check: each WRITE
// is checked as if alone; the first that fails is refused, with those
// before it applied and answered. reg is pinned by the caller.
func (s *responder) applyEach(h *request, list []byte, reg *region, g grantSpan, confined bool) error {
	w := request{op: rdma.OpWrite, seq: h.seq, rkey: h.rkey}
	for len(list) > 0 {
		e, payload, rest, _ := nextElem(list) // checked by scanList
		list = rest
		w.flags, w.len, w.raddr = e.flags, e.len, e.raddr
		if e.count > 0 {
			w.len = 8
		}
		for j := uint32(0); j < e.writes(); j++ {
			n := uint64(w.len)
			in := w.raddr >= e.raddr && (!confined || w.raddr >= g.lo && n <= g.hi-g.lo && w.raddr-g.lo <= g.hi-g.lo-n)
			var dst []byte
			if in {
				dst, in = reg.span(w.raddr, n)
			}
			if !in {
				return s.refuse(&w, rdma.StatusRemoteAccess)
			}
			putBytes(dst, payload[:n])
			payload = payload[n:]
			s.ackUpto = w.seq
			s.wanted = s.wanted || w.flags&reqSignaled != 0
			s.now = s.now || w.flags&reqAckNow != 0
			w.seq++
			w.raddr += uint64(e.stride) // a run's next WRITE (a plain entry has one); one past the top wraps below e.raddr and is refused
		}
	}
	return nil
}

func (s *responder) apply(r *request, payload []byte) error {
	q := s.q
	switch r.op {
	case rdma.OpWrite, rdma.OpWriteImm:
		reg, dst, st := s.remoteSpan(r.rkey, r.raddr, uint64(r.len), rdma.AccessRemoteWrite)
		if st != rdma.StatusSuccess {
			return s.refuse(r, st)
		}
		var rr rdma.RecvRequest
		if r.op == rdma.OpWriteImm {
			var ok bool
			if rr, ok = s.takeRecv(); !ok {
				reg.release()
				return s.nak(r.seq, rdma.StatusRNRRetryExceeded)
			}
		}
		putBytes(dst, payload)
		reg.release()
		if r.op == rdma.OpWriteImm {
			q.rcq.push(rdma.Completion{ID: rr.ID, Op: rdma.OpRecvImm, QPN: q.num, Bytes: r.len, Imm: r.imm})
		}
		s.ackUpto = r.seq
		s.wanted = s.wanted || r.flags&reqSignaled != 0
		s.now = s.now || r.flags&reqAckNow != 0
		return nil
	case rdma.OpSend:
		rr, ok := s.takeRecv()
		if !ok {
			return s.nak(r.seq, rdma.StatusRNRRetryExceeded)
		}
		if r.len > rr.Local.Len {
			q.rcq.push(rdma.Completion{ID: rr.ID, Status: rdma.StatusLocalLength, Op: rdma.OpRecv, QPN: q.num})
			return s.nak(r.seq, rdma.StatusRemoteInvalidRequest)
		}
		if r.len > 0 {
			reg, dst, st := q.localSpan(rr.Local, rdma.AccessLocalWrite, r.len)
			if st != rdma.StatusSuccess {
				q.rcq.push(rdma.Completion{ID: rr.ID, Status: st, Op: rdma.OpRecv, QPN: q.num})
				return s.nak(r.seq, rdma.StatusRemoteOp)
			}
			putBytes(dst, payload)
			reg.release()
		}
		q.rcq.push(rdma.Completion{ID: rr.ID, Op: rdma.OpRecv, QPN: q.num, Bytes: r.len, Imm: r.imm})
		s.ackUpto = r.seq
		s.wanted = s.wanted || r.flags&reqSignaled != 0
		s.now = s.now || r.flags&reqAckNow != 0
		return nil
	case rdma.OpRead:
		reg, src, st := s.remoteSpan(r.rkey, r.raddr, uint64(r.len), rdma.AccessRemoteRead)
		if st != rdma.StatusSuccess {
			return s.refuse(r, st)
		}
		err := s.respond(response{kind: respRead, len: r.len, seq: r.seq}, src)
		reg.release()
		return err
	case rdma.OpCompareAndSwap, rdma.OpFetchAndAdd:
		reg, dst, st := s.remoteSpan(r.rkey, r.raddr, 8, rdma.AccessRemoteAtomic)
		if st != rdma.StatusSuccess {
			return s.refuse(r, st)
		}
		if !aligned8(dst) {
			reg.release()
			return s.nak(r.seq, rdma.StatusRemoteInvalidRequest)
		}
		var orig uint64
		p := word(dst)
		if r.op == rdma.OpFetchAndAdd {
			orig = atomic.AddUint64(p, r.arg1) - r.arg1
		} else {
			for {
				orig = atomic.LoadUint64(p)
				if orig != r.arg1 || atomic.CompareAndSwapUint64(p, orig, r.arg2) {
					break
				}
			}
		}
		reg.release()
		return s.respond(response{kind: respAtomic, seq: r.seq, value: orig}, nil)
	}
	return fmt.Errorf("%w: op %d", ErrFrame, r.op) // decodeRequest lets no other op through
}
